"""A newc ("070701") cpio writer and reader, the format the kernel unpacks initramfs from.

Written in Python so that building the guest image needs no ``cpio`` package. Archives
are reproducible: entries carry mtime 0, uid/gid 0 and inode numbers in write order.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import BinaryIO

MAGIC = b"070701"
TRAILER = "TRAILER!!!"
_HEADER_LEN = 110  # magic + 13 eight-digit hex fields


@dataclass(frozen=True)
class Entry:
    """One archive member as read back by :func:`read_newc`."""

    name: str
    mode: int
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)


def _pad(length: int) -> bytes:
    return b"\0" * (-length % 4)


class CpioWriter:
    """Append newc entries to a binary stream; call :meth:`close` to write the trailer."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._ino = 0
        self._names: set[str] = set()
        self._closed = False

    def add_dir(self, name: str, mode: int = 0o755) -> None:
        self._entry(name, stat.S_IFDIR | mode, b"", nlink=2)

    def add_file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, data)

    def add_chardev(self, name: str, major: int, minor: int, mode: int = 0o600) -> None:
        self._entry(name, stat.S_IFCHR | mode, b"", rdev=(major, minor))

    def close(self) -> None:
        """Write the trailer entry; the stream itself stays open."""
        if not self._closed:
            self._header(TRAILER, 0, b"", nlink=1, ino=0, rdev=(0, 0))
            self._closed = True

    def _entry(
        self, name: str, mode: int, data: bytes, nlink: int = 1, rdev: tuple[int, int] = (0, 0)
    ) -> None:
        name = name.strip("/")
        if self._closed:
            raise ValueError("cpio archive already closed")
        if not name or name == TRAILER or name.split("/").count("..") or name in self._names:
            raise ValueError(f"bad or duplicate cpio member name: {name!r}")
        self._names.add(name)
        self._ino += 1
        self._header(name, mode, data, nlink=nlink, ino=self._ino, rdev=rdev)

    def _header(
        self, name: str, mode: int, data: bytes, *, nlink: int, ino: int, rdev: tuple[int, int]
    ) -> None:
        encoded = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0)
        header = MAGIC + b"".join(b"%08X" % f for f in fields)
        self._out.write(header + encoded + _pad(len(header) + len(encoded)))
        self._out.write(data + _pad(len(data)))


def read_newc(blob: bytes) -> list[Entry]:
    """Parse an uncompressed newc archive up to its trailer (used by tests and checks)."""
    entries: list[Entry] = []
    pos = 0
    while True:
        header = blob[pos : pos + _HEADER_LEN]
        if len(header) < _HEADER_LEN or header[:6] != MAGIC:
            raise ValueError(f"no newc header at offset {pos}")
        f = [int(header[6 + 8 * i : 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = f[1], f[6], f[11]
        name_end = pos + _HEADER_LEN + namesize
        name = blob[pos + _HEADER_LEN : name_end - 1].decode()
        data_start = name_end + (-name_end % 4)
        data = blob[data_start : data_start + size]
        pos = data_start + size + (-size % 4)
        if name == TRAILER:
            return entries
        entries.append(Entry(name=name, mode=mode, data=data, rdev=(f[9], f[10])))
