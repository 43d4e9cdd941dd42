"""Host CPU against guest CPU for one window: the two ``top``s (host and guest) of the
idle-guest exit-storm write-up, as numbers.

The host side is the QEMU process's threads (``/proc/PID/task/TID/stat``: utime, stime and
guest_time, which Linux also counts in utime); the guest side is the guest's own
``/proc/stat``. Both are cumulative counters read at the start and the end of the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvmlab.exits.model import CpuWindow


@dataclass
class ThreadTimes:
    """One snapshot of a process's threads (seconds of CPU), at ``uptime`` seconds."""

    uptime: float
    threads: dict[int, tuple[str, float, float, float]] = field(default_factory=dict)

    @classmethod
    def parse(cls, header: str, body: str) -> ThreadTimes:
        """trace.sh's ``cpu-*`` section: ``UPTIME CLK_TCK`` then ``tid utime stime guest comm``.

        A header that is not two positive numbers is a :class:`ValueError`; thread lines
        that are not numbers are skipped.
        """
        words = header.split()
        if len(words) < 2:
            raise ValueError(f"not 'UPTIME CLK_TCK': {header!r}")
        uptime, hz = float(words[0]), float(words[1])
        if not (math.isfinite(uptime) and math.isfinite(hz) and hz > 0):
            raise ValueError(f"not 'UPTIME CLK_TCK': {header!r}")
        snap = cls(uptime=uptime)
        for line in body.splitlines():
            parts = line.split(maxsplit=4)
            if len(parts) < 4 or not all(p.isascii() and p.isdigit() for p in parts[:4]):
                continue
            tid, user, system, guest = (int(p) for p in parts[:4])
            comm = parts[4] if len(parts) > 4 else ""
            snap.threads[tid] = (comm, user / hz, system / hz, guest / hz)
        return snap


def cpu_window(start: ThreadTimes, end: ThreadTimes) -> CpuWindow:
    """What the process's threads used between two snapshots (threads in both)."""
    user = system = guest = 0.0
    per_thread: dict[str, float] = {}
    split: dict[str, dict[str, float]] = {}
    for tid, (comm, u1, s1, g1) in end.threads.items():
        if tid not in start.threads:
            continue
        _, u0, s0, g0 = start.threads[tid]
        user, system, guest = user + u1 - u0, system + s1 - s0, guest + g1 - g0
        label = f"{comm} ({tid})"
        per_thread[label] = round(u1 - u0 + s1 - s0, 3)
        in_guest = max(0.0, g1 - g0)  # guest time is inside user time
        split[label] = {
            "guest": round(in_guest, 3),
            "kernel": round(max(0.0, s1 - s0), 3),
            "qemu_user": round(max(0.0, u1 - u0 - in_guest), 3),
        }
    return CpuWindow(
        seconds=round(end.uptime - start.uptime, 3),
        host_user=round(user, 3),
        host_system=round(system, 3),
        host_guest=round(guest, 3),
        threads=per_thread,
        thread_split=split,
    )


def proc_stat_busy(text: str, hz: float = 100.0) -> tuple[float, float]:
    """(busy, total) seconds of all CPUs in a ``/proc/stat``.

    Busy is what the guest ran: user, nice, system, irq, softirq; not idle, iowait or steal
    (time its vCPUs were runnable but the host ran something else: under a busy or nested
    host that is most of the time, and counting it would call an idle guest busy).
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            # user nice system idle iowait irq softirq steal guest guest_nice; guest time
            # is already in user, so the first eight make the total.
            values = fields[1:9]
            if len(values) < 4 or not all(v.isascii() and v.isdigit() for v in values):
                break
            ticks = [int(v) for v in values]
            ticks += [0] * (8 - len(ticks))
            total = sum(ticks)
            busy = total - ticks[3] - ticks[4] - ticks[7]
            return busy / hz, total / hz
    raise ValueError("no 'cpu' line in /proc/stat")


def add_guest_side(window: CpuWindow, before: str, after: str, wall: float) -> None:
    """Fill the guest side from two ``/proc/stat`` readings ``wall`` seconds apart.

    The readings bracket the traced window (they are taken through the guest agent just
    before and after it), so the guest's busy time is scaled to the window's length.
    A reading that is not a ``/proc/stat`` leaves the guest side unknown (None).
    """
    try:
        busy0, total0 = proc_stat_busy(before)
        busy1, total1 = proc_stat_busy(after)
    except ValueError:
        return
    scale = window.seconds / wall if wall > 0 else 1.0
    window.guest_busy = round((busy1 - busy0) * scale, 3)
    window.guest_total = round((total1 - total0) * scale, 3)
