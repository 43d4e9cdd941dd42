"""kvmlab-rtc's rate arithmetic and refusals (its real ticks are profiled in
tests/exits/test_rtc_storm.py)."""

from __future__ import annotations

import os

import pytest

from kvmlab.guest.rtc_pie import main, rate_select


def test_rates_are_the_rtcs_powers_of_two() -> None:
    assert rate_select(1024) == 6  # Windows' raised timer resolution (the idle-guest storm)
    assert rate_select(8192) == 3 and rate_select(2) == 15
    with pytest.raises(ValueError, match=r"powers of two: 2, 4, .*, 8192 Hz, not 1000"):
        rate_select(1000)


def test_a_bad_rate_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--hz", "1000"]) == 2
    assert capsys.readouterr().err.startswith("kvmlab-rtc: the RTC's periodic rates are")


class FakeCmos:
    """The CMOS RTC's index/data ports, as /dev/port offsets 0x70/0x71, with a tick handler
    that may run between an index write and its data (as the kernel's can)."""

    def __init__(self) -> None:
        self.index = 0
        self.regs = {0x0A: 0x26, 0x0B: 0x02, 0x0C: 0x00}
        self.writes: list[tuple[int, int]] = []
        self.interleave = 0
        """How many index writes are each followed by the handler's own accesses."""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if offset == 0x70:
            self.index = data[0]
            if self.interleave:
                self.interleave -= 1
                self.index = 0x0C  # the handler: select C, read it, select B, read it
                self.regs[0x0C] = 0
                self.index = 0x0B
        else:
            self.writes.append((self.index, data[0]))
            self.regs[self.index] = data[0]
        return 1

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return bytes([self.regs[self.index]])


def test_ticks_on_then_both_registers_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvmlab.guest import rtc_pie

    cmos = FakeCmos()
    monkeypatch.setattr(os, "pwrite", cmos.pwrite)
    monkeypatch.setattr(os, "pread", cmos.pread)
    seen: list[dict[int, int]] = []

    def stop() -> bool:
        seen.append(dict(cmos.regs))
        return True

    assert rtc_pie._held(rtc_pie.Cmos(0), 1024, 6, 0, stop) == 0
    assert seen[0][0x0A] == 0x26 and seen[0][0x0B] == 0x42  # rate 6 (1024 Hz), PIE on
    assert cmos.regs[0x0A] == 0x26 and cmos.regs[0x0B] == 0x02  # as found


def test_a_write_the_tick_handler_redirected_is_written_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvmlab.guest import rtc_pie

    cmos = FakeCmos()
    monkeypatch.setattr(os, "pwrite", cmos.pwrite)
    monkeypatch.setattr(os, "pread", cmos.pread)
    cmos.interleave = 1  # the first write's data lands in B, not A
    rtc_pie.Cmos(0).write(0x0A, 0x27, mask=0x7F)
    assert cmos.regs[0x0A] == 0x27, "read back, found wrong, written again"
    # what the race did to B: why A is written only while no tick can come
    assert cmos.writes[0] == (0x0B, 0x27)


def test_a_register_that_never_takes_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvmlab.guest import rtc_pie

    cmos = FakeCmos()
    monkeypatch.setattr(os, "pwrite", cmos.pwrite)
    monkeypatch.setattr(os, "pread", lambda fd, size, offset: b"\x00")
    with pytest.raises(OSError, match="RTC register 0x0b would not take 0x42"):
        rtc_pie.Cmos(0).write(0x0B, 0x42)
