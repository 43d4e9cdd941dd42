"""``--out FILE``: checked before anything runs, written with one-line errors.

A missing directory is refused, never created: kvmlab writes where it is told and nowhere
else. Bad paths are usage errors (exit 2); a write that fails (``/dev/full``, a full disk)
is :class:`OutputError` (exit 3).

Nothing is written through a link: a final symlink is refused, a new or regular file is
written as a temporary file in the same directory and renamed over the path (so a hard
link elsewhere keeps its content), and only a device or pipe already there (``/dev/null``)
is written in place, opened without following a link and without blocking.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
from pathlib import Path

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
    check_out(path, flag)
    data = text.encode("utf-8")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    try:
        if mode is None or stat.S_ISREG(mode):
            _replace(path, data)
        else:
            _write_in_place(path, data)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.ENXIO:  # a pipe (FIFO) nobody has open for reading
            why = "nothing is reading that pipe; start its reader first"
        raise OutputError(f"cannot write {flag} {printable(str(path))}: {why}") from None


def _replace(path: Path, data: bytes) -> None:
    """A new file in ``path``'s directory, renamed over ``path`` (a regular file or nothing)."""
    # a short name of its own: any name the filesystem takes for ``path`` can be written
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kvmlab-", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as a plain open would have made it
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_in_place(path: Path, data: bytes) -> None:
    """Into a device or pipe that is there already (``/dev/null``, a FIFO with a reader)."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(path, flags)
    with os.fdopen(fd, "wb") as file:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        file.write(data)
