"""``--out FILE``: checked before anything runs, written with one-line errors.

A missing directory is refused, never created: kvmlab writes where it is told and nowhere
else. Bad paths are usage errors (exit 2); a write that fails (``/dev/full``, a full disk)
is :class:`OutputError` (exit 3).

Nothing is written through a link: a final symlink is refused, a new or regular file is
written as a temporary file in the same directory and renamed over the path (so a hard
link elsewhere keeps its content), and only a device or pipe already there (``/dev/null``)
is written in place, opened without following a link and without blocking.

Only a character device (``/dev/null``, ``/dev/full``, a terminal) or a pipe is written in
place; a block device (a disk: ``/dev/sda`` mistyped would be destroyed) and a socket are
refused like a directory, and the file opened is checked again to be what was allowed.

:func:`open_out` streams: what is written goes to the temporary file as it comes (a large
export never sits whole in memory), renamed over the path only once all of it was written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from kvmlab.errors import KvmlabError, UsageError, printable


class OutputError(KvmlabError):
    """A file kvmlab was asked to write could not be written."""

    exit_code = 3


def check_out(path: Path, flag: str = "--out") -> None:
    """Refuse (:class:`UsageError`, one line) a path that cannot be written as a file."""
    shown = printable(str(path))
    try:
        info: os.stat_result | None = path.lstat()
    except FileNotFoundError:
        info = None
    except OSError as exc:  # a name too long, a file where a directory should be, a loop
        raise UsageError(f"{flag} {shown}: {_why(exc)}") from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise UsageError(
            f"{flag} {shown} is a symbolic link; kvmlab does not write through "
            "links: give the file itself, or a new name"
        )
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(
            f"{flag} {shown} is a directory; give a file name, e.g. "
            f"{printable(str(path / 'report.html'))}"
        )
    if info is not None and not _in_place(info.st_mode) and not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{flag} {shown} is {_kind(info.st_mode)}; {_NOT_THERE}")
    parent = path.parent
    if not parent.exists():
        raise UsageError(
            f"{flag} {shown}: directory {printable(str(parent))} does not exist; create it first"
        )
    if not parent.is_dir():
        raise UsageError(f"{flag} {shown}: {printable(str(parent))} is not a directory")
    if info is not None and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {shown}: not writable ({_denied(parent)})")
    replaced = info is None or stat.S_ISREG(info.st_mode)  # a new file is made, renamed there
    if replaced and not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(
            f"{flag} {shown}: cannot create files in {printable(str(parent))} ({_denied(parent)})"
        )


_NOT_THERE = (
    "kvmlab writes to a file, a pipe or a character device only, never onto a disk: "
    "give a file name"
)


def _in_place(mode: int) -> bool:
    """Whether a file of ``mode`` already there is written in place: a character device
    (``/dev/null``, ``/dev/full``, a terminal) or a pipe."""
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _kind(mode: int) -> str:
    """``a block device (a disk)``, ``a socket``: what a path refused for ``--out`` is."""
    if stat.S_ISBLK(mode):
        return "a block device (a disk)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return f"not a file (mode {mode:o})"


def _why(exc: OSError) -> str:
    """What an OSError about a path means, and what to do."""
    if exc.errno == errno.ENAMETOOLONG:
        return "a name in it is longer than the filesystem allows; give a shorter name"
    if exc.errno == errno.ENOTDIR:
        return "a part of it is a file, not a directory"
    if exc.errno == errno.ELOOP:
        return "its directories are symbolic links in a loop"
    return f"cannot be used ({exc.strerror or exc})"


def _denied(parent: Path) -> str:
    """``read-only filesystem`` or ``permission denied``."""
    try:
        if os.statvfs(parent).f_flag & os.ST_RDONLY:
            return "read-only filesystem"
    except OSError:
        pass
    return "permission denied"


def write_out(path: Path, text: str, flag: str = "--out") -> None:
    """Write ``text`` to ``path`` (checked first) without following a link; one-line errors."""
    with open_out(path, flag) as file:
        file.write(text)


@contextmanager
def open_out(path: Path, flag: str = "--out") -> Iterator[TextIO]:
    """``path`` (checked first) open for writing UTF-8 text, streamed: a new or regular
    file is written as a temporary file beside it, renamed over it when the block ends
    without an error (and removed when it raises); a device or pipe already there is
    written in place. Newlines are written as given (``newline=""``). An OSError while
    the block writes is :class:`OutputError`, one line."""
    check_out(path, flag)
    try:
        mode: int | None = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    tmp: Path | None = None
    try:
        if mode is None or stat.S_ISREG(mode):
            fd, name = _temporary(path)
            tmp = Path(name)
        else:
            fd = _open_in_place(path, flag)
        file = os.fdopen(fd, "w", encoding="utf-8", newline="")
    except OSError as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise _failed(path, flag, exc) from None
    try:
        yield file
        file.close()  # flushes: a full disk shows here
        if tmp is not None:
            tmp.replace(path)
    except BaseException as exc:  # nothing half-written is left (Ctrl-C included)
        with suppress(OSError):
            file.close()
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _failed(path, flag, exc) from None
        raise


def _failed(path: Path, flag: str, exc: OSError) -> OutputError:
    why = exc.strerror or str(exc)
    with suppress(OSError):
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(path.lstat().st_mode):
            why = "nothing is reading that pipe; start its reader first"  # nobody has it open
    return OutputError(f"cannot write {flag} {printable(str(path))}: {why}")


def _temporary(path: Path) -> tuple[int, str]:
    """A new file in ``path``'s directory (mode as a plain open would make it), to be
    renamed over ``path`` (a regular file or nothing)."""
    # a short name of its own: any name the filesystem takes for ``path`` can be written
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kvmlab-", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return fd, tmp


def _open_in_place(path: Path, flag: str) -> int:
    """A character device or pipe that is there already (``/dev/null``, a FIFO with a
    reader), opened without following a link or blocking; what was opened is checked
    again (a disk swapped in after :func:`check_out` is refused, not written)."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not _in_place(mode):
            raise UsageError(f"{flag} {printable(str(path))} is {_kind(mode)}; {_NOT_THERE}")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd
