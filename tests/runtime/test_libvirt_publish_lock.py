"""The publish lock: one kvmlab's clean-up of unused uploads waits while another has an
upload whose domain is not made yet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvmlab.runtime.libvirt import publish

TRY = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(1)
"""


def other_kvmlab_could_take(lock: Path) -> bool:
    return subprocess.run([sys.executable, "-c", TRY, str(lock)]).returncode == 0


def test_held_across_holders_in_one_process_and_blocking_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    lock = tmp_path / "run" / publish.LOCK
    publish.hold()  # a machine between its upload and its domain
    try:
        assert not other_kvmlab_could_take(lock)
        with publish.publishing():  # this process's own clean-up does not deadlock
            pass
        assert not other_kvmlab_could_take(lock)  # still the machine's
    finally:
        publish.release()
    assert other_kvmlab_could_take(lock)
    publish.release()  # one too many: harmless
    assert publish._depth == [0] and publish._held == []
