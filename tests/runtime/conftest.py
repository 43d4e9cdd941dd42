"""Fixtures for tests that boot real guests: a private run root and a process census."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def pids_mentioning(marker: str, program: str = "") -> list[int]:
    """Live (non-zombie) processes whose command line mentions ``marker`` (and ``program``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker in cmdline and program in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def qemu_pids(marker: str) -> list[int]:
    """Live processes whose command line mentions ``marker`` and a QEMU.

    Broad on purpose: it also counts the host-view wrapper (``unshare ... sh hostview.sh``)
    that is about to exec QEMU, and that wrapper's short-lived forks.
    """
    return pids_mentioning(marker, "qemu-system")


def running_qemus(marker: str) -> list[int]:
    """Live processes that are QEMU itself (argv[0]) and mention ``marker``."""
    found = []
    for pid in pids_mentioning(marker, "qemu-system"):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if Path(argv0.decode()).name.startswith("qemu-system"):
            found.append(pid)
    return found


@pytest.fixture
def run_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private run root for this test; afterwards no QEMU of it may survive."""
    root = tmp_path / "run"
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(root))
    yield root
    leftovers = qemu_pids(str(root))
    for pid in leftovers:
        os.kill(pid, 9)
    assert not leftovers, f"QEMU processes left behind: {leftovers}"


def write_lab(directory: Path, name: str, extra: str = "") -> Path:
    """A one-guest lab booting the default image, with ``extra`` lines in the guest table."""
    lab = directory / f"{name}.toml"
    lab.write_text(f'name = "{name}"\n[guests.vm]\nvcpus = 1\nmemory = "512M"\n{extra}')
    return lab


def kvmlab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the CLI with the test's environment (KVMLAB_RUN_DIR included)."""
    return subprocess.run(
        [KVMLAB, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )  # exec forwards stdin, as ssh does


def wait_for(path: Path, timeout: float) -> None:
    """Wait until ``path`` exists."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.02)
