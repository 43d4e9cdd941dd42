"""kvmlab's cache root and the only ways anything in it is deleted.

The root is ``$KVMLAB_CACHE``, else ``$XDG_CACHE_HOME/kvmlab``, else ``~/.cache/kvmlab``.
Before kvmlab writes or deletes there the root is checked as the run root is: absolute, not
``/``, a real directory owned by the user and writable by nobody else, its parents owned by
the user or root and not writable by others (unless sticky, like /tmp), and either marked
as kvmlab's (:data:`MARKER`) or holding nothing but what kvmlab puts there; so
``KVMLAB_CACHE=/etc`` is refused instead of being written or deleted in.

kvmlab deletes only entries it made: a direct child of a section directory (``images``,
``kernels``, ``disks``) named like a cache key, a kernel package or one of kvmlab's
temporary names, reached through real directories only (no symlink followed). Never the
root or a section itself; ``rmtree`` works on file descriptors, so a symlink inside an
entry is removed as a link, never followed.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from kvmlab.errors import UsageError
from kvmlab.paths import unsafe_own_dir, unsafe_parent

MARKER = ".kvmlab-cache"
SECTIONS = ("images", "kernels", "disks")
_KNOWN = {*SECTIONS, MARKER, "kbuild", "bench-venvs"}  # what older kvmlabs left in the root
_ENTRY_RE = re.compile(
    r"^(?:[0-9a-f]{24}"  # image and disk entries: cache_key()
    r"|linux-image-[A-Za-z0-9.+~-]+_[A-Za-z0-9.+~:-]+"  # kernel entries: package_version
    r"|\.(?:tmp|stale|work)-[A-Za-z0-9_]+)$"  # mkdtemp names kvmlab uses in a section
)


def default_root() -> Path:
    """``$KVMLAB_CACHE``, else ``$XDG_CACHE_HOME/kvmlab``, else ``~/.cache/kvmlab``.

    A relative ``XDG_CACHE_HOME`` is ignored (the XDG rule); a relative ``KVMLAB_CACHE``
    is an error.
    """
    if env := os.environ.get("KVMLAB_CACHE"):
        if not env.startswith("/"):
            raise UsageError(f"KVMLAB_CACHE must be an absolute path, not {env!r}")
        return Path(os.path.normpath(env))
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base.startswith("/"):
        base = str(Path.home() / ".cache")
    return Path(os.path.normpath(base)) / "kvmlab"


def checked_root(root: Path | None = None, create: bool = True) -> Path:
    """The cache root (``root`` or the default), checked; created with ``create``."""
    root = Path(os.path.normpath(root or default_root()))
    if not root.is_absolute() or root == Path("/"):
        raise UsageError(f"the cache directory must be an absolute path other than /: {root}")
    if why := unsafe_parent(root):
        raise UsageError(
            f"cache directory {root}: {why}; set KVMLAB_CACHE to a directory of your own"
        )
    if not os.path.lexists(root):
        if not create:
            return root
        root.mkdir(parents=True)
        (root / MARKER).write_text("kvmlab cache\n")
        return root
    if why := unsafe_own_dir(root):
        raise UsageError(f"cache directory {why}; set KVMLAB_CACHE to one")
    if not (root / MARKER).is_file():
        strange = sorted(
            p.name
            for p in root.iterdir()
            if p.name not in _KNOWN and not p.name.startswith(".bench-boot-")
        )
        if strange:
            raise UsageError(
                f"cache directory {root} holds files kvmlab did not create "
                f"({', '.join(strange[:3])}); set KVMLAB_CACHE to an empty or new directory"
            )
        if create:
            (root / MARKER).write_text("kvmlab cache\n")
    return root


def section(name: str, root: Path | None = None) -> Path:
    """``ROOT/name`` for a section of the checked cache root, created if missing."""
    if name not in SECTIONS:
        raise ValueError(f"unknown cache section {name!r}")
    path = checked_root(root) / name
    try:
        path.mkdir()
    except FileExistsError:
        if not stat.S_ISDIR(path.lstat().st_mode):
            raise UsageError(f"{path} is not a directory (a symlink?); remove it") from None
    return path


def section_of(path: Path) -> Path:
    """The section directory ``path`` (a section directory) is, after checking its root."""
    return section(path.name, path.parent)


def _confined(entry: Path) -> bool:
    """Raise unless kvmlab may delete ``entry`` (see the module doc); whether it is a real
    directory (True) or a symlink, which is removed as a link."""
    if not _ENTRY_RE.match(entry.name):
        raise UsageError(f"refusing to delete {entry}: not a kvmlab cache entry name")
    section_of(entry.parent)
    mode = entry.lstat().st_mode
    if not stat.S_ISDIR(mode) and not stat.S_ISLNK(mode):
        raise UsageError(f"refusing to delete {entry}: not a directory")
    return stat.S_ISDIR(mode)


def remove_entry(entry: Path) -> None:
    """Delete a cache entry kvmlab made (see the module doc); a missing one is fine."""
    if not os.path.lexists(entry):
        return
    if _confined(entry):
        shutil.rmtree(entry)
    else:
        entry.unlink()


def discard(entry: Path) -> None:
    """Move a bad entry aside first (so its name is free even if deleting fails), delete it."""
    if not _confined(entry):
        entry.unlink()
        return
    stale = Path(tempfile.mkdtemp(prefix=".stale-", dir=entry.parent))
    entry.rename(stale / "entry")
    shutil.rmtree(stale, ignore_errors=True)


def clear_section(name: str, root: Path | None = None) -> list[str]:
    """Delete every entry of a section kvmlab made; return the names left alone."""
    path = section(name, root)
    skipped = []
    for child in sorted(path.iterdir()):
        mode = child.lstat().st_mode
        if _ENTRY_RE.match(child.name) and (stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            remove_entry(child)
        else:
            skipped.append(child.name)
    return skipped
