"""Downtime as the guest lives it: heartbeat arrivals timed on the host.

``kvmlab-dirty`` in the guest writes a line every 10 ms of guest time to the probe port;
the source's and the destination's QEMU append those lines to their own ``probe.log``. A
thread here looks at both files every 2 ms and notes when each grows. The longest
gap between two arrivals around the switch-over is the time the guest made no progress
as an outside observer sees it; the guest's own clock cannot show it under TCG (its
clock stops with it).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.002
"""Resolution of the arrival times. The poller costs ~5% of one host CPU (6% at 1 ms)."""


@dataclass(frozen=True)
class Gap:
    """The longest pause between two heartbeats in a window, in seconds."""

    seconds: float
    start: float
    """When it began (monotonic seconds)."""


Where = Path | Callable[[], Path | None]
"""A file, or how to find it once it exists (a destination QEMU libvirt starts later)."""
FIND_S = 0.02
"""How often a file not found yet is looked for."""
STEADY_S = 1.0
"""After a switch-over, the heartbeats must come this long without a pause over the
steadiness bound before the downtime window closes."""
STEADY_CEILING_S = 30.0
"""How long after the resume the window may stay open for a guest that never settles
(scaled by the level's measured slowness on the qemu path)."""
STEADY_PAUSE_S = 0.1
"""The smallest steadiness bound: a pause of heartbeats (every 10 ms) longer than this, or
than twice the longest pause seen before the migration, is not steady."""


class Arrivals:
    """Arrival times (monotonic seconds) of something a running guest keeps sending, and
    the pauses between them: its heartbeats, or the echoes of a network probe."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []

    def longest_gap(self, since: float, until: float) -> Gap | None:
        """The longest pause in [since, until], counted whole: a pause that began before
        the window or ends after it is measured from the arrival before to the arrival
        after (one still going at ``until`` counts up to ``until``); None without an
        arrival before ``until``."""
        arrivals = sorted(self.arrivals)
        before = [t for t in arrivals if t < since][-1:]
        inside = [t for t in arrivals if since <= t <= until]
        after = [t for t in arrivals if t > until][:1]
        times = before + inside + (after or ([until] if before + inside else []))
        if len(times) < 2:
            return None
        best = max(range(1, len(times)), key=lambda i: times[i] - times[i - 1])
        return Gap(times[best] - times[best - 1], times[best - 1])

    def wait_steady(self, since: float, pause: float, ceiling: float) -> float:
        """Wait until heartbeats have come steadily for :data:`STEADY_S` after ``since``
        (none of their pauses longer than ``pause``), and return when: the end of the
        window a downtime is measured in. Gives up ``ceiling`` seconds after ``since``
        (a guest that never settles: its pause is then still counted, up to that end)."""
        while True:
            now = time.monotonic()
            start = max(since, now - STEADY_S)
            times = [start, *(t for t in list(self.arrivals) if t >= start), now]
            calm = all(b - a <= pause for a, b in itertools.pairwise(times))
            if (now - since >= STEADY_S and calm) or now - since >= ceiling:
                return now
            time.sleep(0.05)

    def beats(self, since: float, until: float) -> int:
        """How many arrivals fell in [since, until]."""
        return sum(1 for t in list(self.arrivals) if since <= t <= until)


class HeartbeatWatch(Arrivals):
    """Arrival times of heartbeats in any of several files (monotonic seconds)."""

    def __init__(self, files: Sequence[Where]) -> None:
        super().__init__()
        self.files = list(files)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kvmlab-probe", daemon=True)

    def _size(self, path: Path) -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    def _run(self) -> None:
        sizes = {p: self._size(p) for p in self.files if isinstance(p, Path)}
        pending = [f for f in self.files if not isinstance(f, Path)]
        looked = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if pending and now - looked >= FIND_S:
                looked = now
                for find in list(pending):
                    found = find()
                    if found is not None:  # its size now: growth from here is a heartbeat
                        pending.remove(find)
                        sizes[found] = self._size(found)
            for path, before in sizes.items():
                size = self._size(path)
                if size > before:
                    sizes[path] = size
                    self.arrivals.append(now)
                elif size < before:  # truncated by a new writer (a QEMU opening it again)
                    sizes[path] = size
                    if size:  # and written to since
                        self.arrivals.append(now)
            time.sleep(POLL_S)

    def start(self) -> HeartbeatWatch:
        """Begin watching."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (waits for the thread)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2.0)


def measure_downtime(
    watch: Arrivals, base_since: float, t0: float, resumed: float, ceiling: float
) -> tuple[Gap | None, Gap | None]:
    """The guest's downtime and the heartbeats' own noise, as both migration paths measure
    them: the window opens at the migration's start ``t0`` and closes once heartbeats have
    been steady for :data:`STEADY_S` after the guest ``resumed`` (at most ``ceiling`` s
    later); the baseline is the longest pause in [``base_since``, ``t0``]."""
    base = watch.longest_gap(base_since, t0)
    pause = max(STEADY_PAUSE_S, 2 * base.seconds) if base else STEADY_PAUSE_S
    end = watch.wait_steady(resumed, pause, ceiling)
    return watch.longest_gap(t0, end), base
