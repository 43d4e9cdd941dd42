"""Processes kvmlab starts: is it still ours and alive, stop it with timeouts, read log tails."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import time
from pathlib import Path

from kvmlab.proc.signals import unblock_in_child


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the command name (field 3 onwards), or None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (OSError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22).

    Together with the pid it names one process for good: a recycled pid has a later start.
    It survives ``exec``, so a wrapper that execs QEMU keeps the start time it had.
    """
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def cmdline(pid: int) -> str | None:
    """The command line of ``pid``, arguments joined by spaces, or None when gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace")


def argv_of(pid: int) -> list[str] | None:
    """The command line of ``pid`` as its words, or None when gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [w.decode(errors="replace") for w in raw.split(b"\0")[:-1]] or [""]


QEMU = "qemu-system"
"""What a QEMU binary's name starts with (``qemu-system-x86_64``)."""

WRAPPERS = frozenset({"unshare", "nsenter", "sh", "busybox", "env", "nice", "setsid"})
"""Programs that start another with their last ``--`` (kvmlab's host-view wrapper runs
QEMU as ``unshare ... -- sh hostview.sh ... -- qemu-system-x86_64 ...`` until it execs)."""


def program_args(argv: list[str], program: str) -> list[str] | None:
    """The words of ``argv`` from the ``program`` it runs on (``qemu-system``: the QEMU
    binary and its arguments), or None when it runs no such program: its first word is
    that program, or a wrapper of :data:`WRAPPERS` hands over to it after a ``--``. A
    program that merely names ``program`` in an argument (``grep qemu-system LOG``) runs
    none."""
    if not argv:
        return None
    if Path(argv[0]).name.startswith(program):
        return argv
    if Path(argv[0]).name not in WRAPPERS:
        return None
    for i in range(1, len(argv) - 1):
        if argv[i] == "--" and Path(argv[i + 1]).name.startswith(program):
            return argv[i + 1 :]
    return None


_SEPARATORS = re.compile(r"[\0=,: ]")


def mentions(line: str, marker: str) -> bool:
    """Whether a command line names ``marker`` as a path of its own: an argument, or a value
    after ``=``, ``,`` or ``:`` (``path=RUN/qmp.sock``) starts with it. Merely containing it
    is not enough: ``/run/kvmlab/lab/vm/`` is inside ``/srv/ci/run/kvmlab/lab/vm/``."""
    return any(token.startswith(marker) for token in _SEPARATORS.split(line))


def alive(
    pid: int, marker: str | None = None, started: int | None = None, program: str | None = None
) -> bool:
    """Whether ``pid`` runs (not a zombie) and is still the process we mean.

    ``started`` (its :func:`start_time`) and ``marker`` (text its command line contains,
    e.g. its run directory) guard against a recycled pid; with ``program``
    (``qemu-system``), the process must run that program (:func:`program_args`) and the
    marker must be among that program's own arguments.
    """
    if pid <= 0:
        return False
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return False
    if started is not None and start_time(pid) != started:
        return False
    if program is not None:
        argv = argv_of(pid)
        args = program_args(argv, program) if argv is not None else None
        if args is None:
            return False
        return marker is None or mentions(" ".join(args), marker)
    if marker is not None:
        line = cmdline(pid)
        return line is not None and mentions(line, marker)
    return True


def find_marked(marker: str, program: str = "qemu-system") -> list[int]:
    """Live processes whose command line names ``program`` and contains ``marker``.

    How kvmlab finds a QEMU it started but could not record (killed between spawn and
    record, or its record is unreadable): every QEMU it starts has its run directory in
    its command line. The process must run ``program`` (not merely name it, as ``grep
    qemu-system RUN/qemu.log`` does) with the marker among its own arguments.
    """
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        if alive(int(proc.name), marker, program=program):
            found.append(int(proc.name))
    return sorted(found)


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


def terminate(
    pid: int,
    marker: str | None = None,
    grace: float = 5.0,
    started: int | None = None,
    program: str | None = None,
) -> bool:
    """SIGTERM, wait ``grace`` seconds, then SIGKILL and wait; True when it is gone.

    The process is confirmed (``marker``, ``started``, ``program``) before each signal, so
    a pid that was recycled meanwhile is never signalled.
    """
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not alive(pid, marker, started, program):
            wait_gone(pid, 0)
            return True
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        if wait_gone(pid, wait, marker):
            return True
    return not alive(pid, marker, started, program)


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
    fields = _stat_fields(pid)
    if not fields:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """``preexec_fn``: the child gets SIGKILL when kvmlab dies (a killed benchmark leaves no
    testpmd or iperf3 server), with the signals kvmlab may hold unblocked."""
    unblock_in_child()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
