"""``kvmlab exec`` and ``kvmlab console``: reaching into a running guest."""

from __future__ import annotations

import sys

from kvmlab.cli.run_cmds import find_guest
from kvmlab.errors import UsageError


def run_exec(address: str, command: list[str], timeout: float) -> int:
    """Run a command in a guest, pass its output through, return its exit code."""
    from kvmlab.runtime.machine import Machine

    if not command:
        raise UsageError("give the command to run after --, e.g. kvmlab exec basic/vm1 -- uname -r")
    run_dir, record = find_guest(address)
    result = Machine.attach(run_dir, record).exec(command, timeout=timeout)
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(result.stderr)
    sys.stderr.flush()
    return result.returncode if result.returncode >= 0 else 128 - result.returncode


def run_console(address: str) -> None:
    """Attach the terminal to a guest's serial console (Ctrl-] detaches)."""
    from kvmlab.cli.console import attach
    from kvmlab.render.devices.control import CONSOLE_SOCKET

    run_dir, record = find_guest(address)
    if record.via is not None:
        outer = f"{record.lab}/{record.via}"
        raise UsageError(f"{address} runs inside {outer}: its console is there "
                         f"('kvmlab exec {outer} -- kvmlab console ...')")  # fmt: skip
    attach(run_dir / CONSOLE_SOCKET)
