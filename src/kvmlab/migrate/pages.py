"""Every page of guest RAM compared at the switch-over (``migrate --compare-pages``).

Once a precopy migration completes, the source is paused (QEMU's ``postmigrate``) and the
destination, started with ``-S``, holds the guest paused: both QEMUs then hold what should
be the same guest RAM. Each writes its guest-physical RAM ranges (the RAM regions of its
system address space, from ``info mtree -f``) into a FIFO with QMP's ``pmemsave``; kvmlab
hashes the stream page by page as it comes (nothing lands on disk) and names the pages that
differ by guest physical address. Only then does the destination run.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE = 4096
NAMED = 8
"""How many differing pages a verdict names (the count is always whole)."""

_FLATVIEW = re.compile(r"^FlatView #\d+")
_AS = re.compile(r'^\s*AS "([^"]+)"')
_RANGE = re.compile(r"^\s*([0-9a-f]{16})-([0-9a-f]{16}) \(prio -?\d+, ([a-z/]+)\): (\S+)")


@dataclass(frozen=True)
class RamRange:
    """Guest-physical RAM ``[start, start + size)``, of RAM block ``name``."""

    start: int
    size: int
    name: str


def ram_ranges(mtree: str) -> list[RamRange]:
    """The RAM ranges of the system address space (AS ``memory``), from HMP ``info mtree
    -f``: contiguous ranges of one block merged, ROM and I/O left out."""
    out: list[RamRange] = []
    spaces: set[str] = set()
    in_view = False
    for line in mtree.splitlines():
        if _FLATVIEW.match(line):
            if "memory" in spaces and out:
                break
            spaces, in_view, out = set(), True, []
            continue
        if not in_view:
            continue
        if m := _AS.match(line):
            spaces.add(m.group(1))
            continue
        m = _RANGE.match(line)
        if m is None or m.group(3) != "ram":
            continue
        start, end, name = int(m.group(1), 16), int(m.group(2), 16), m.group(4)
        if out and out[-1].name == name and out[-1].start + out[-1].size == start:
            last = out.pop()
            out.append(RamRange(last.start, end + 1 - last.start, name))
        else:
            out.append(RamRange(start, end + 1 - start, name))
    return out if "memory" in spaces else []


def page_hashes(chunks: Callable[[int], bytes], size: int) -> list[bytes]:
    """A digest per page of ``size`` bytes read from ``chunks`` (``read(n)``); a stream cut
    short is a :class:`OSError`."""
    digests: list[bytes] = []
    left = size
    buffer = b""
    while left > 0:
        data = chunks(min(1 << 20, left))
        if not data:
            raise OSError(f"the RAM stream ended {left} bytes short")
        left -= len(data)
        buffer += data
        whole = len(buffer) - len(buffer) % PAGE
        for at in range(0, whole, PAGE):
            digests.append(hashlib.blake2b(buffer[at : at + PAGE], digest_size=16).digest())
        buffer = buffer[whole:]
    if buffer:
        digests.append(hashlib.blake2b(buffer, digest_size=16).digest())
    return digests


Saver = Callable[[int, int, str], None]
"""``save(start, size, path)``: a QEMU writes guest-physical ``[start, start + size)`` to
``path`` (QMP ``pmemsave``), returning once it has."""


def hashed_ram(save: Saver, ranges: Sequence[RamRange], fifo: Path) -> list[bytes]:
    """Each page's digest of ``ranges`` as one QEMU saves them, through FIFO ``fifo`` (made
    here, removed after): a reader thread hashes while the QEMU writes."""
    digests: list[bytes] = []
    for ram in ranges:
        os.mkfifo(fifo, 0o600)
        try:
            digests += _through_fifo(save, ram, fifo)
        finally:
            with contextlib.suppress(OSError):
                fifo.unlink()
    return digests


class _Reader(threading.Thread):
    """Hashes what a QEMU writes into a FIFO."""

    def __init__(self, fifo: Path, size: int) -> None:
        super().__init__(name="kvmlab-pages", daemon=True)
        self.fifo, self.size = fifo, size
        self.digests: list[bytes] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.fifo.open("rb", buffering=0) as stream:
                self.digests = page_hashes(stream.read, self.size)
        except BaseException as exc:  # handed to the caller
            self.error = exc


def _end_the_wait(reader: _Reader, fifo: Path, patience: float = 60.0) -> None:
    """A QEMU that never opened the FIFO (its save failed at once) leaves the reader waiting
    for a writer: an empty one ends that wait. The reader may not have opened its side yet
    (then a writer cannot open: ENXIO), so this waits for it to, while it runs."""
    deadline = time.monotonic() + patience
    while reader.is_alive() and reader.digests is None and time.monotonic() < deadline:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                return
            time.sleep(0.005)


def _through_fifo(save: Saver, ram: RamRange, fifo: Path) -> list[bytes]:
    reader = _Reader(fifo, ram.size)
    reader.start()
    try:
        save(ram.start, ram.size, str(fifo))
    finally:
        _end_the_wait(reader, fifo)
        reader.join(60)
    if reader.error is not None:
        raise OSError(f"reading {ram.name}'s RAM: {reader.error}")
    if reader.digests is None:
        raise OSError(f"reading {ram.name}'s RAM: no data within 60 s")
    return reader.digests


@dataclass
class PageCompare:
    """What the comparison found: pages compared, the guest-physical addresses of those
    that differ, and how long the guest stayed paused for it."""

    compared: int = 0
    differing: list[int] = field(default_factory=list)
    pause_s: float = 0.0
    ranges: list[RamRange] = field(default_factory=list)
    error: str | None = None
    """Why no comparison was made (it then decides nothing)."""

    @property
    def ok(self) -> bool:
        """Every page the same on both sides."""
        return self.error is None and not self.differing

    def evidence(self) -> str:
        """One line for the verdict."""
        if self.error is not None:
            return f"pages not compared: {self.error}"
        if not self.differing:
            return f"all {self.compared} pages of guest RAM identical on both sides"
        named = ", ".join(f"{gpa:#x}" for gpa in self.differing[:NAMED])
        more = f" and {len(self.differing) - NAMED} more" if len(self.differing) > NAMED else ""
        return (
            f"{len(self.differing)} of {self.compared} pages of guest RAM differ between "
            f"source and destination: guest physical {named}{more}"
        )

    def to_json(self) -> dict[str, Any]:
        """The comparison for JSON and the store."""
        return {
            "compared": self.compared,
            "differing": len(self.differing),
            "differing_gpas": [f"{gpa:#x}" for gpa in self.differing],
            "pause_s": round(self.pause_s, 3),
            "ranges": [
                {"start": f"{r.start:#x}", "size": r.size, "block": r.name} for r in self.ranges
            ],
            "error": self.error,
        }


def differing(
    ranges: Sequence[RamRange], source: Sequence[bytes], dest: Sequence[bytes]
) -> list[int]:
    """The guest-physical addresses of the pages whose digests differ."""
    addresses = [r.start + n * PAGE for r in ranges for n in range(-(-r.size // PAGE))]
    if not len(addresses) == len(source) == len(dest):
        raise OSError(
            f"the sides' RAM differs in size ({len(source)} and {len(dest)} pages, "
            f"{len(addresses)} expected)"
        )
    return [gpa for gpa, a, b in zip(addresses, source, dest, strict=True) if a != b]
