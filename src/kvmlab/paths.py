"""Where kvmlab keeps run-time state (sockets, logs) by default, and whether a place is safe."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def run_root() -> Path:
    """``$KVMLAB_RUN_DIR``, else ``/run/kvmlab`` for root, else ``$XDG_RUNTIME_DIR/kvmlab``."""
    if env := os.environ.get("KVMLAB_RUN_DIR"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/kvmlab")
    return Path(os.environ.get("XDG_RUNTIME_DIR", f"/tmp/kvmlab-{os.geteuid()}")) / "kvmlab"


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
