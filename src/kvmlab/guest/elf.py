"""Just enough ELF64 reading for the image builder: program headers and notes."""

from __future__ import annotations

import struct
from collections.abc import Iterator

PT_INTERP = 3
PT_NOTE = 4
XEN_ELFNOTE_PHYS32_ENTRY = 18  # the entry point QEMU's PVH loader looks for


def _program_headers(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(p_type, p_offset, p_filesz) of each program header; empty if not ELF64 LE."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        offset = phoff + i * phentsize
        if offset + 56 > len(data):
            return
        p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, offset
        )
        yield p_type, p_offset, p_filesz


def is_elf64(data: bytes) -> bool:
    return len(data) >= 64 and data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1


def needs_interpreter(data: bytes) -> bool:
    """True if the executable is dynamically linked (has PT_INTERP)."""
    return any(p_type == PT_INTERP for p_type, _, _ in _program_headers(data))


def notes(data: bytes) -> Iterator[tuple[bytes, int]]:
    """(name, type) of every note in the PT_NOTE segments."""
    for p_type, offset, size in _program_headers(data):
        if p_type != PT_NOTE:
            continue
        pos, end = offset, min(offset + size, len(data))
        while pos + 12 <= end:
            namesz, descsz, n_type = struct.unpack_from("<III", data, pos)
            name = data[pos + 12 : pos + 12 + namesz].rstrip(b"\0")
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
            yield name, n_type


def has_pvh_entry(data: bytes) -> bool:
    """True if QEMU can boot this vmlinux directly through its PVH entry point."""
    return (b"Xen", XEN_ELFNOTE_PHYS32_ENTRY) in notes(data)
