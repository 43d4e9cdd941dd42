"""Processes kvmlab starts: is it still ours and alive, stop it with timeouts, read log tails."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def alive(pid: int, marker: str | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, if given, its command line contains ``marker``.

    The marker (a run-directory path) guards against a recycled pid.
    """
    proc = Path(f"/proc/{pid}")
    try:
        stat = (proc / "stat").read_text()
        if stat.rpartition(")")[2].split()[0] in ("Z", "X"):
            return False
        if marker is not None:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            return marker in cmdline
        return True
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_gone(pid: int, timeout: float, marker: str | None = None) -> bool:
    """Wait until ``pid`` has exited (reaping it if it is our child); True when gone."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return True
        except ChildProcessError:
            pass
        if not alive(pid, marker):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def terminate(pid: int, marker: str | None = None, grace: float = 5.0) -> None:
    """SIGTERM, wait ``grace`` seconds, then SIGKILL and wait; quiet when already gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not alive(pid, marker):
            wait_gone(pid, 0)
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_gone(pid, wait, marker):
            return


def tail(path: Path, lines: int = 20) -> list[str]:
    """The last ``lines`` lines of a text file (empty when missing)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [line.rstrip("\r") for line in text.splitlines()[-lines:]]


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of ``pid`` (all threads), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks
