"""The page comparison's pure parts: guest RAM ranges from QEMU 7.2's own ``info mtree -f``
(recorded), page digests from a stream, the FIFO a QEMU writes into (here a thread stands in
for QEMU's ``pmemsave``), and the pages named by guest physical address."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import cast

import pytest

from kvmlab.migrate import pages
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
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.switchover import HOOK_ENV, compare_at_switchover
from kvmlab.migrate.transports.base import AnyTransport, PageSides
from kvmlab.progress import Progress

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


def _zeros(start: int, size: int, path: str) -> None:
    """Guest RAM of zeros, as pmemsave would write it into the FIFO."""
    with open(path, "wb") as out:  # noqa: PTH123 (as QEMU's fopen)
        for _ in range(size // (1 << 20)):
            out.write(bytes(1 << 20))
        out.write(bytes(size % (1 << 20)))


class _Paused:
    """A transport at the switch-over: both sides' RAM (a stand-in for pmemsave), and
    whether the destination was let run."""

    def __init__(self, tmp_path: Path, saver: Saver | None = None) -> None:
        mtree = (DATA / "mtree-q35-512m-qemu72.txt").read_text()
        self.sides = PageSides(saver or _zeros, _zeros, mtree, tmp_path, 4242, 4243)
        self.resumed = 0

    def page_sides(self) -> PageSides:
        return self.sides

    def resume_destination(self) -> None:
        self.resumed += 1


def _compare(transport: _Paused) -> Outcome:
    outcome = Outcome("lab/vm", "precopy")
    compare_at_switchover(cast(AnyTransport, transport), outcome, Progress())
    return outcome


def test_a_failing_switch_over_program_fails_the_verdict_with_its_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = tmp_path / "hook"
    hook.write_text('#!/bin/sh\necho "cannot open /proc/$1/mem" >&2\nexit 3\n')
    hook.chmod(0o755)
    monkeypatch.setenv(HOOK_ENV, str(hook))
    transport = _Paused(tmp_path)
    check = _compare(transport).checks_after[-1]
    assert not check.ok and transport.resumed == 1
    assert f"{hook} exited 3: cannot open /proc/4242/mem" in check.evidence


def test_ctrl_c_while_comparing_still_lets_the_destination_run(tmp_path: Path) -> None:
    def interrupted(start: int, size: int, path: str) -> None:
        raise KeyboardInterrupt

    transport = _Paused(tmp_path, interrupted)
    outcome = Outcome("lab/vm", "precopy")
    with pytest.raises(KeyboardInterrupt):
        compare_at_switchover(cast(AnyTransport, transport), outcome, Progress())
    assert transport.resumed == 1, "the destination must not stay paused"
    assert outcome.pages is not None and outcome.pages.pause_s >= 0
    assert not list(tmp_path.glob("*.fifo")), "no FIFO left behind"


def test_a_save_that_fails_before_the_reader_opened_does_not_hold_the_guest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader thread opens its side late (a busy host): a QEMU whose save failed at
    once must not leave it waiting the whole minute for a writer, the guest paused."""
    opened = pages._Reader.run

    def late(self: pages._Reader) -> None:
        time.sleep(0.3)
        opened(self)

    monkeypatch.setattr(pages._Reader, "run", late)

    def refuses(start: int, size: int, path: str) -> None:
        raise OSError("pmemsave refused")

    t0 = time.monotonic()
    with pytest.raises(OSError, match="pmemsave refused"):
        hashed_ram(refuses, [RamRange(0, PAGE, "pc.ram")], tmp_path / "x.fifo")
    assert time.monotonic() - t0 < 30, "waited for a writer that never came"
