"""Directories kvmlab creates and may therefore delete: confined to its run root, marked.

kvmlab runs as root and deletes run state. It deletes a directory only when all of these
hold: the path is below the (checked) run root, every component below the root is a real
directory (no symlink is followed out of it), and the directory carries the marker file
kvmlab wrote when it created it. The run root itself is never deleted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
from pathlib import Path

from kvmlab.errors import StateError, printable
from kvmlab.paths import run_root, unsafe_own_dir, unsafe_parent

MARKER = ".kvmlab-owned"
"""Written into every directory kvmlab creates under the run root; its text says what."""


def _mkdir_private(path: Path) -> None:
    path.mkdir(mode=0o700)
    path.chmod(0o700)  # mkdir's mode is masked by the umask


def checked_run_root(create: bool = True) -> Path:
    """The run root, checked (and with ``create``, created 0700 with its missing parents).

    It must be absolute, owned by the user and writable by nobody else, and its existing
    parents owned by the user or root and not writable by others (unless sticky, like
    /tmp). An existing directory that kvmlab did not make (no marker, other contents) is
    refused, so ``KVMLAB_RUN_DIR=/etc`` cannot turn kvmlab loose on /etc. A run root that
    cannot be checked or created (a parent it may not search, a read-only or full file
    system) is a :class:`StateError` naming KVMLAB_RUN_DIR and what fixes it.
    """
    root = run_root()
    if not root.is_absolute():
        raise StateError(f"KVMLAB_RUN_DIR must be an absolute path, not {str(root)!r}")
    root = Path(os.path.normpath(root))
    if root == Path("/"):
        raise StateError("KVMLAB_RUN_DIR must not be /")
    try:
        return _checked_run_root(root, create)
    except OSError as exc:
        raise StateError(_run_root_failure(root, exc)) from None


def _checked_run_root(root: Path, create: bool) -> Path:
    """:func:`checked_run_root` once ``root`` is an absolute path other than /."""
    missing = [p for p in (root, *root.parents) if not p.exists()]
    if why := unsafe_parent(root):
        raise StateError(
            f"run directory {root}: {why}; set KVMLAB_RUN_DIR to a private directory of your own"
        )
    if missing:
        if not create:
            return root
        try:
            for path in reversed(missing):
                _mkdir_private(path)
        except FileExistsError:  # another kvmlab made it meanwhile: check it as found
            return _checked_run_root(root, create)
        _write_marker(root, "run root")
        return root
    if why := unsafe_own_dir(root.resolve()):
        raise StateError(f"run directory {why}; set KVMLAB_RUN_DIR to a private directory")
    if not (root / MARKER).is_file():
        if any(root.iterdir()):
            raise StateError(
                f"run directory {root} holds files kvmlab did not create; set KVMLAB_RUN_DIR "
                "to an empty or new directory"
            )
        if create:
            _write_marker(root, "run root")
    return root


def _write_marker(directory: Path, what: str) -> None:
    """Write ``directory``'s marker saying ``what`` it is. A failed write names the marker
    (an OSError from writing an open file carries no file name: a full disk)."""
    marker = directory / MARKER
    try:
        marker.write_text(f"{what}\n")
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(marker)) from None


_RUN_ROOT_FIXES = {
    errno.EROFS: "its file system is read-only: set KVMLAB_RUN_DIR to a private directory "
    "on a writable one",
    errno.ENOSPC: "its file system is full: free space there, or set KVMLAB_RUN_DIR to a "
    "private directory on another one",
    errno.EDQUOT: "your disk quota there is used up: free space, or set KVMLAB_RUN_DIR to a "
    "private directory on another file system",
}


def _run_root_failure(root: Path, exc: OSError) -> str:
    """One line: the run root, the path that failed and why, and what fixes it."""
    raw = exc.filename
    path = os.fsdecode(raw) if isinstance(raw, (str, bytes)) else str(root)
    at = "" if Path(path) == root else f" ({printable(path)})"
    why = exc.strerror or str(exc)
    verb = "cannot be checked or created"
    fix = _RUN_ROOT_FIXES.get(
        exc.errno or 0,
        "set KVMLAB_RUN_DIR to a private directory of your own that you can create and write",
    )
    return f"run directory {printable(str(root))} {verb}{at}: {why}; {fix}"


def _confined(path: Path, root: Path) -> None:
    """Raise unless ``path`` is strictly below ``root`` through real directories only."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise StateError(f"refusing to touch {path}: it is outside the run root {root}") from None
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise StateError(f"refusing to touch {path}: not a directory below the run root {root}")
    current = root
    for part in parts:
        current = current / part
        mode = current.lstat().st_mode
        if not stat.S_ISDIR(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a directory"
            raise StateError(f"refusing to touch {current}: it is {kind}")


def create_owned(path: Path, what: str) -> Path:
    """Create ``path`` (0700, below the run root) with kvmlab's marker; reuse it if ours."""
    root = checked_run_root()
    try:
        _mkdir_private(path)
    except FileExistsError:
        _confined(path, root)
        if not (path / MARKER).is_file() and any(path.iterdir()):
            raise StateError(f"{path} exists and kvmlab did not create it") from None
        path.chmod(0o700)
    else:
        _confined(path, root)
    _write_marker(path, what)
    return path


def remove_owned(path: Path) -> None:
    """Delete ``path`` and what it holds, only if kvmlab created it (see the module doc).

    A missing ``path`` is fine; one that is not kvmlab's raises :class:`StateError`.
    """
    root = checked_run_root(create=False)
    if not os.path.lexists(path):
        return
    _confined(path, root)
    if not (path / MARKER).is_file():
        raise StateError(f"not removing {path}: kvmlab did not create it (no {MARKER} marker)")
    if mounted := mounts_at_or_below(path):
        raise StateError(f"not removing {path}: {mounted[0]} is a mount point")
    # The marker goes last, so a removal cut short can be finished by the next one.
    # rmtree works on file descriptors here (avoids_symlink_attacks): a symlink inside
    # is removed as a link, never followed.
    for child in path.iterdir():
        if child.name == MARKER:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    (path / MARKER).unlink()
    path.rmdir()


def mounts_at_or_below(path: Path) -> list[str]:
    """Mount points at or below ``path`` (/proc/self/mountinfo: bind mounts of the same
    file system included, which a device-number check misses)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    base = os.path.realpath(path)
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])
        if point == base or point.startswith(base + "/"):
            found.append(point)
    return found


def write_private(path: Path, data: str | bytes) -> None:
    """Write ``path`` atomically (temporary file, then rename) with mode 0600. A write that
    fails (a full disk) removes the temporary file and names it in its OSError."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(fd, 0o600)
            f.write(raw)
            f.flush()
            os.fsync(fd)
        tmp.replace(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(tmp)) from None
        raise
