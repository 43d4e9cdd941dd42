"""``kvmlab-rtc``: drive the RTC's periodic interrupt in this guest, as the Windows guest of
the idle-guest exit-storm write-up did.

A Windows guest without an HPET drives its clock from the RTC's periodic interrupt at
1024 Hz, and acknowledges every tick by reading RTC register C through ports 0x70/0x71:
under KVM each access is an exit (its IO_INSTRUCTION storm). A Linux guest does not
do that by itself (its ``/dev/rtc0`` periodic mode is an hrtimer since 2.6.38), so this
program turns the hardware's periodic interrupt on through ``/dev/port``: rate in register
A, PIE in register B. From then on the kernel's own rtc-cmos interrupt handler reads
registers C and B on every tick, as Windows' does, until the program is stopped (SIGTERM,
SIGINT, ``--seconds``) and puts both registers back as it found them.

With an HPET in legacy replacement mode (QEMU's default HPET, which Linux uses so), the
RTC's interrupt line is the HPET's and the ticks never reach the CPU: the HPET fix.

Runs as root inside the guest with the guest's python3 and the standard library only:

    kvmlab-rtc [--hz 1024] [--seconds N]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

PORT = "/dev/port"
INDEX, DATA = 0x70, 0x71
REG_A, REG_B = 0x0A, 0x0B
PIE = 0x40
"""Register B's periodic interrupt enable."""
RATE_MASK = 0x0F
"""Register A's rate select bits (the divider bits above them are kept)."""
UIP = 0x80
"""Register A's update-in-progress bit: read-only, it changes by itself."""
WRITE_TRIES = 20


def rate_select(hz: int) -> int:
    """Register A's rate select for ``hz``: 32768 >> (RS - 1) Hz, RS 3 (8192 Hz) to 15 (2 Hz)."""
    for rs in range(3, 16):
        if 32768 >> (rs - 1) == hz:
            return rs
    choices = ", ".join(str(32768 >> (rs - 1)) for rs in range(15, 2, -1))
    raise ValueError(f"the RTC's periodic rates are powers of two: {choices} Hz, not {hz}")


class Cmos:
    """The CMOS RTC's registers through ``/dev/port`` (an index write, then the data)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, reg: int) -> int:
        os.pwrite(self.fd, bytes([reg]), INDEX)
        return os.pread(self.fd, 1, DATA)[0]

    def write(self, reg: int, value: int, mask: int = 0xFF) -> None:
        """Write a register and read it back (``mask``: the bits that must read as written),
        again until it took: user space cannot take the kernel's rtc_lock, so its tick
        handler can select another register between the index write and the data. With
        one vCPU (the lab's) it runs between two accesses, never beside them, and selects
        C then B: a write to B lands in B anyway; A is written only while ticks are off."""
        for _ in range(WRITE_TRIES):
            os.pwrite(self.fd, bytes([reg]), INDEX)
            os.pwrite(self.fd, bytes([value]), DATA)
            if self.read(reg) & mask == value & mask:
                return
        raise OSError(f"RTC register {reg:#04x} would not take {value:#04x}")


def main(argv: list[str] | None = None) -> int:
    """Turn the periodic interrupt on, hold it until stopped, put the registers back."""
    parser = argparse.ArgumentParser(prog="kvmlab-rtc", description=__doc__.splitlines()[0])
    parser.add_argument("--hz", type=int, default=1024, help="tick rate (a power of two)")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this (0: never)")
    args = parser.parse_args(argv)
    try:
        rs = rate_select(args.hz)
        fd = os.open(PORT, os.O_RDWR)
    except (ValueError, OSError) as exc:
        print(f"kvmlab-rtc: {exc}", file=sys.stderr)
        return 2
    stop = False

    def stopped(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stopped)
    try:
        return _held(Cmos(fd), args.hz, rs, args.seconds, lambda: stop)
    except OSError as exc:
        print(f"kvmlab-rtc: {exc}", file=sys.stderr)
        return 3
    finally:
        os.close(fd)


def _held(cmos: Cmos, hz: int, rs: int, seconds: float, stop: Callable[[], bool]) -> int:
    """Ticks on at ``hz`` until ``stop()`` or ``seconds``; registers put back however it ends."""
    a, b = cmos.read(REG_A), cmos.read(REG_B)
    try:
        if b & PIE:
            cmos.write(REG_B, b & ~PIE)
        cmos.write(REG_A, (a & ~RATE_MASK) | rs, mask=~UIP & 0xFF)
        cmos.write(REG_B, b | PIE)
        print(
            f"kvmlab-rtc: RTC periodic interrupt on at {hz} Hz (register A {a:#04x} -> "
            f"{(a & ~RATE_MASK) | rs:#04x}, B {b:#04x} -> {b | PIE:#04x})",
            flush=True,
        )
        end = time.monotonic() + seconds if seconds else None
        while not stop() and (end is None or time.monotonic() < end):
            time.sleep(0.2)
    finally:
        cmos.write(REG_B, b & ~PIE)
        cmos.write(REG_A, a, mask=~UIP & 0xFF)
        cmos.write(REG_B, b)
    print(f"kvmlab-rtc: registers put back (A {a:#04x}, B {b:#04x})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
