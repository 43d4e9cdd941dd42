"""Where kvmlab keeps run-time state (sockets, logs) by default, and whether a place is safe."""

from __future__ import annotations

import os
import stat
from pathlib import Path

NAME_MAX = 255
"""The longest name one path component may have (bytes, as Linux counts them)."""
RUN_ROOT_MAX = 1024
"""The longest run root kvmlab takes: its own paths below it stay far from PATH_MAX."""


def run_root() -> Path:
    """``$KVMLAB_RUN_DIR``, else ``/run/kvmlab`` for root, else ``$XDG_RUNTIME_DIR/kvmlab``.

    The variable is checked as a path first: a component longer than :data:`NAME_MAX`
    bytes, a path longer than :data:`RUN_ROOT_MAX` or a control character is refused
    (:class:`StateError`), never handed to the file system to fail on later."""
    if env := os.environ.get("KVMLAB_RUN_DIR"):
        check_path_text(env, "KVMLAB_RUN_DIR", RUN_ROOT_MAX)
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/kvmlab")
    return Path(os.environ.get("XDG_RUNTIME_DIR", f"/tmp/kvmlab-{os.geteuid()}")) / "kvmlab"


def data_dir() -> Path:
    """kvmlab's data directory: ``$XDG_DATA_HOME/kvmlab``, else ``~/.local/share/kvmlab``
    (the results database, and the disks of shipped labs, live there).

    A relative ``XDG_DATA_HOME`` (``data``, ``./share``) is ignored, as the XDG Base
    Directory specification says ("If an implementation encounters a relative path in any
    of these variables it should consider the path invalid and ignore it"): kvmlab falls
    back to ``~/.local/share``, as if the variable were unset or empty, and says nothing."""
    base = Path(os.environ.get("XDG_DATA_HOME", ""))
    if not base.is_absolute():
        base = Path.home() / ".local" / "share"
    return base / "kvmlab"


SHIPPED_LABS = Path(__file__).resolve().parent / "labs"
"""Where the lab files shipped with kvmlab are (the package's ``labs``)."""


def shipped_lab_data(path: Path) -> Path | None:
    """For a lab file shipped with kvmlab, the directory its relative paths (scratch
    disks) go to: ``data_dir()/labs/NAME``, never the installed package; None for any
    other lab file (its relative paths are relative to it)."""
    try:
        if path.resolve().parent != SHIPPED_LABS:
            return None
    except OSError:
        return None
    return data_dir() / "labs" / path.stem


def check_path_text(text: str, shown: str, longest: int = 4095) -> None:
    """Refuse (:class:`StateError`) a path the file system cannot hold, or that would
    reach a terminal or a configuration file as control characters, in one line naming
    ``shown`` (the variable or option it came from)."""
    from kvmlab.errors import StateError, printable

    raw = os.fsencode(text)
    brief = printable(text if len(text) <= 60 else f"{text[:40]}...{text[-12:]}")
    if any(not c.isprintable() for c in text):
        raise StateError(f"{shown}={brief}: a control character in a path; name a plain path")
    if len(raw) > longest:
        raise StateError(
            f"{shown}={brief}: {len(raw)} bytes long, more than {longest}; name a shorter path"
        )
    if long := [p for p in raw.split(b"/") if len(p) > NAME_MAX]:
        raise StateError(
            f"{shown}={brief}: a component of {len(long[0])} bytes, more than the file "
            f"system's {NAME_MAX}; name a path of shorter directories"
        )


def unsafe_parent(path: Path) -> str | None:
    """Why an existing parent of ``path`` would let another user swap what is below it.

    Parents must be directories owned by the user or root, and not writable by others
    unless sticky (like /tmp). None when all are safe.
    """
    euid = os.geteuid()
    for parent in path.parents:
        if not parent.exists():
            continue
        info = parent.stat()
        mode = stat.S_IMODE(info.st_mode)
        if not stat.S_ISDIR(info.st_mode):
            return f"{parent} is not a directory"
        if info.st_uid not in (0, euid):
            return f"{parent} belongs to uid {info.st_uid}, not to you or root"
        if mode & 0o022 and not mode & stat.S_ISVTX:
            return f"{parent} is writable by others (mode {mode:o}) without the sticky bit"
    return None


def unsafe_own_dir(path: Path) -> str | None:
    """Why ``path`` (existing) is not a private directory of the user's own, or None."""
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        mode = stat.S_IMODE(info.st_mode)
        return (
            f"{path} must be a directory of yours (not a symlink) that nobody else can "
            f"write (it is uid {info.st_uid}, mode {mode:o})"
        )
    return None
