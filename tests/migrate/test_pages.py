"""The page comparison's pure parts: guest RAM ranges from QEMU 7.2's own ``info mtree -f``
(recorded), page digests from a stream, the FIFO a QEMU writes into (here a thread stands in
for QEMU's ``pmemsave``), and the pages named by guest physical address."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from kvmlab.migrate.pages import (
    PAGE,
    PageCompare,
    RamRange,
    Saver,
    differing,
    hashed_ram,
    page_hashes,
    ram_ranges,
)

DATA = Path(__file__).parent / "data"


def test_the_system_address_space_s_ram_ranges() -> None:
    small = ram_ranges((DATA / "mtree-q35-512m-qemu72.txt").read_text())
    assert small == [
        RamRange(0, 0xC0000, "pc.ram"),  # below the ROM window at 0xc0000
        RamRange(0x100000, 0x20000000 - 0x100000, "pc.ram"),
    ]
    big = ram_ranges((DATA / "mtree-q35-4g-qemu72.txt").read_text())
    assert big[-1] == RamRange(0x100000000, 0x80000000, "pc.ram")  # above 4 GiB: the rest
    assert sum(r.size for r in big) == 4 * 2**30 - (0x100000 - 0xC0000)


def test_no_system_address_space_is_no_ranges() -> None:
    assert (
        ram_ranges(
            'FlatView #0\n AS "I/O", root: io\n  0000000000000000-'
            "0000000000000007 (prio 0, ram): x\n"
        )
        == []
    )


def test_page_digests_of_a_stream_read_in_odd_chunks() -> None:
    data = bytes(range(256)) * (3 * PAGE // 256) + b"tail"
    stream = io.BytesIO(data)
    digests = page_hashes(lambda n: stream.read(min(n, 1000)), len(data))
    assert len(digests) == 4 and digests[0] == digests[1] == digests[2] != digests[3]
    with pytest.raises(OSError, match="ended 4 bytes short"):
        page_hashes(io.BytesIO(data[:-4]).read, len(data))


def writer(data: bytes) -> Saver:
    """A stand-in for QEMU's pmemsave: opens the path and writes guest-physical bytes."""

    def save(start: int, size: int, path: str) -> None:
        with open(path, "wb") as out:  # noqa: PTH123 (as QEMU's fopen)
            out.write(data[start : start + size])

    return save


def test_ram_through_a_fifo_and_the_pages_that_differ(tmp_path: Path) -> None:
    ram = bytearray(os.urandom(64 * PAGE))
    ranges = [RamRange(0, 16 * PAGE, "pc.ram"), RamRange(32 * PAGE, 32 * PAGE, "pc.ram")]
    source = hashed_ram(writer(bytes(ram)), ranges, tmp_path / "a.fifo")
    ram[40 * PAGE + 7] ^= 0xFF  # one byte of one page, in the second range
    dest = hashed_ram(writer(bytes(ram)), ranges, tmp_path / "b.fifo")
    assert len(source) == len(dest) == 48
    assert differing(ranges, source, dest) == [40 * PAGE]
    assert not (tmp_path / "a.fifo").exists() and not (tmp_path / "b.fifo").exists()


def test_a_qemu_that_never_writes_ends_the_wait(tmp_path: Path) -> None:
    def refuses(start: int, size: int, path: str) -> None:
        raise OSError("pmemsave refused")

    with pytest.raises(OSError, match="pmemsave refused"):
        hashed_ram(refuses, [RamRange(0, PAGE, "pc.ram")], tmp_path / "x.fifo")
    short = writer(b"x" * 100)
    with pytest.raises(OSError, match=r"reading pc\.ram's RAM: the RAM stream ended"):
        hashed_ram(short, [RamRange(0, PAGE, "pc.ram")], tmp_path / "y.fifo")


def test_the_verdict_line_names_the_pages() -> None:
    many = PageCompare(100, [0x1000 * n for n in range(10)])
    assert not many.ok
    assert many.evidence().startswith("10 of 100 pages of guest RAM differ")
    assert "0x0, 0x1000" in many.evidence() and "and 2 more" in many.evidence()
    assert PageCompare(100).evidence() == "all 100 pages of guest RAM identical on both sides"
    broken = PageCompare(error="no RAM")
    assert not broken.ok and broken.evidence() == "pages not compared: no RAM"
    assert many.to_json()["differing"] == 10
    with pytest.raises(OSError, match="differs in size"):
        differing([RamRange(0, 2 * PAGE, "x")], [b"a"], [b"a", b"b"])
