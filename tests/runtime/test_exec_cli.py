"""``kvmlab exec`` and ``console`` on a real guest under TCG: stdin, output limit, Ctrl-C.

The same behaviour is tested in a second against the host's own qemu-ga in
tests/guest/test_exec_channel.py; this one boot checks it holds through QEMU's chardev,
virtio-serial and the guest's qemu-ga.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.runtime.conftest import KVMLAB, write_lab

pytestmark = pytest.mark.functional

GUEST_SLEEPS = (  # the guest's sleep processes, one per line
    "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
    'case "$c" in "sleep 61."*) echo "$c";; esac; done; true'
)


def kvmlab(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """The CLI with stdin from ``input`` (else /dev/null), never the test runner's stdin."""
    stdin = None if input is not None else subprocess.DEVNULL
    return subprocess.run(
        [KVMLAB, *args], input=input, stdin=stdin, capture_output=True, timeout=300
    )


def test_exec_is_like_ssh_on_a_real_guest(run_root: Path, tmp_path: Path) -> None:
    lab = write_lab(tmp_path, "chan")
    up = kvmlab("up", str(lab))
    assert up.returncode == 0, up.stderr
    try:
        piped = kvmlab("exec", "chan/vm", "--", "cat", input=b"data\n")
        assert (piped.returncode, piped.stdout, piped.stderr) == (0, b"data\n", b"")

        cut = kvmlab("exec", "chan/vm", "--", "head", "-c", "20000000", "/dev/zero")
        assert cut.returncode == 3 and len(cut.stdout) == 16 * 1024 * 1024
        assert b"wrote more than 16 MiB to stdout" in cut.stderr

        refused = kvmlab("exec", "chan/vm", "--timeout", "0", "--", "true")
        assert refused.returncode == 2 and refused.stderr.count(b"\n") == 1

        serial = run_root / "chan" / "vm" / "serial.log"
        script = "echo sleeps-started > /dev/ttyS0; sleep 61.1 & sleep 61.2; true"
        proc = subprocess.Popen(
            [KVMLAB, "exec", "chan/vm", "--", "sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while b"sleeps-started" not in serial.read_bytes():
            assert time.monotonic() < deadline, "the guest command did not start"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.endswith(b" was killed\n")
        left = kvmlab("exec", "chan/vm", "--", "sh", "-c", GUEST_SLEEPS)
        assert (left.returncode, left.stdout) == (0, b""), "sleeps left in the guest"

        console = kvmlab("console", "chan/vm")  # stdin /dev/null: detaches when quiet
        assert console.returncode == 0, console.stderr
    finally:
        down = kvmlab("down", "chan")
    assert down.returncode == 0, down.stderr
