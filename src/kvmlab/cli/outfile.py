"""``--out FILE``: checked before anything runs, written with one-line errors.

A missing directory is refused, never created: kvmlab writes where it is told and nowhere
else. Bad paths are usage errors (exit 2); a write that fails (``/dev/full``, a full disk)
is :class:`OutputError` (exit 3).
"""

from __future__ import annotations

import os
from pathlib import Path

from kvmlab.errors import KvmlabError, UsageError


class OutputError(KvmlabError):
    """A file kvmlab was asked to write could not be written."""

    exit_code = 3


def check_out(path: Path, flag: str = "--out") -> None:
    """Refuse (:class:`UsageError`) a path that cannot be written as a file."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file name, e.g. "
                         f"{path / 'report.html'}")  # fmt: skip
    parent = path.parent
    if not parent.exists():
        raise UsageError(f"{flag} {path}: directory {parent} does not exist; create it first")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path}: not writable (permission denied)")
    if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create files in {parent} (permission denied)")


def write_out(path: Path, text: str, flag: str = "--out") -> None:
    """Write ``text`` to ``path`` (checked first); one-line errors."""
    check_out(path, flag)
    try:
        with path.open("w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        raise OutputError(f"cannot write {flag} {path}: {exc.strerror or exc}") from None
