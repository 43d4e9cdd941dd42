"""Host files a lab names, checked for what they are when the lab is loaded.

A kernel, an initial ramdisk, a disk image or a QEMU binary that exists must be a regular
file (``/dev/zero`` as a kernel, a directory as a disk, a FIFO that would block QEMU are
refused before anything starts); a vhost-user socket that exists must be a socket. A
file that does not exist yet is not refused here: a disk with a size is created at run
time, and a lab may be checked on another host than it runs on (``up`` says what is
missing). Nothing is opened: each path is only ``stat``-ed, so a device never acts.

Paths are resolved as the renderer resolves them (``~`` expanded, relative to the lab
file's folder). Only top-level guests are checked: a guest inside a guest hypervisor
names files of that guest hypervisor, which its own kvmlab checks.
"""

from __future__ import annotations

import errno
import stat
from collections.abc import Iterator
from pathlib import Path

from kvmlab.spec.devices import VhostUserNic
from kvmlab.spec.lab import Guest, Lab
from kvmlab.spec.units import quoted

Finding = tuple[str, str]
SOCKET = "a vhost-user socket"

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISREG, "a regular file"),
)


def host_file_problems(lab: Lab, directory: Path) -> list[Finding]:
    """``(key, message)`` for each file a top-level guest names that is of the wrong kind."""
    found: list[Finding] = []
    for name, guest in lab.guests.items():
        for key, path, what in _files(guest):
            message = _wrong_kind(path, directory, what)
            if message is not None:
                found.append((f"guests.{name}.{key}", message))
    return found


def _files(guest: Guest) -> Iterator[tuple[str, str, str]]:
    """``(key, path, what it is)`` of each host file the guest names."""
    if guest.boot == "kernel":
        if guest.kernel is not None:
            yield "kernel", guest.kernel, "a kernel image"
        if guest.initrd is not None:
            yield "initrd", guest.initrd, "an initial ramdisk"
    for i, disk in enumerate(guest.disks):
        yield f"disks[{i}].path", disk.path, "a disk image"
    if guest.qemu is not None:
        yield "qemu", guest.qemu, "the QEMU binary"
    for i, nic in enumerate(guest.nics):
        if isinstance(nic, VhostUserNic) and nic.socket is not None:
            yield f"nics[{i}].socket", nic.socket, SOCKET


def _wrong_kind(value: str, directory: Path, what: str) -> str | None:
    """Why ``value`` cannot be ``what`` (None when it can, or does not exist yet)."""
    path = Path(value).expanduser()
    path = path if path.is_absolute() else directory / path
    shown = quoted(value)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return _dangling(path, shown, what)
    except PermissionError:
        return None  # checked by someone who cannot see it; the run says what it finds
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{shown} is a loop of symbolic links: give the path of {what} itself"
        if exc.errno == errno.ENOTDIR:
            return f"{shown} goes through a file as if it were a folder: give the path of {what}"
        if exc.errno == errno.ENAMETOOLONG:
            return f"{shown} is longer than this host takes for a path: give a shorter one"
        return f"{shown} cannot be looked at ({exc.strerror}): give {what} kvmlab can read"
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    if what == SOCKET:
        if stat.S_ISSOCK(mode):
            return None
        return (
            f"{shown} is {kind}, not a socket: give the switch's socket, or remove it so "
            "QEMU (in server mode) can make the socket there"
        )
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISBLK(mode) and what == "a disk image":
        return (
            f"{shown} is a block device; kvmlab attaches disk images as files (QEMU's "
            "'file' driver, libvirt's type='file'), which a block device is not: give an "
            "image file"
        )
    return f"{shown} is {kind}, not {what}: give the path of {what} (a regular file)"


def _dangling(path: Path, shown: str, what: str) -> str | None:
    """A path that does not exist: fine, unless it is a symbolic link to nowhere (a disk
    created there would be made through it, wherever it points)."""
    try:
        if not path.is_symlink():
            return None
        target = str(path.readlink())
    except OSError:
        return None
    return (
        f"{shown} is a symbolic link to {quoted(target)}, which does not exist: give "
        f"the path of {what} itself"
    )
