"""The host's own qemu-ga on a unix socket: the real agent protocol without a VM.

Commands it runs run on the host, as the test's user: tests give it harmless ones only.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def start_host_agent(sock: Path, state: Path, as_qemu: bool = False) -> subprocess.Popen[bytes]:
    """Start ``qemu-ga -m unix-listen`` on ``sock``, its state (pid file) in ``state``;
    ``as_qemu``: named ``qemu-system-x86_64`` (its first word), so kvmlab takes it for the
    QEMU of the guest whose run directory holds ``sock``."""
    argv = [
        "qemu-system-x86_64" if as_qemu else "qemu-ga",
        "-m",
        "unix-listen",
        "-p",
        str(sock),
        "-t",
        str(state),
        "-f",
        str(state / "qga.pid"),
    ]
    return subprocess.Popen(
        argv,
        executable=shutil.which("qemu-ga") or "qemu-ga",
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop it: SIGTERM, then SIGKILL (one was once seen stuck with SIGTERM pending)."""
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
