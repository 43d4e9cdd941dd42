"""Downtime as the guest lives it: heartbeat arrivals timed on the host.

``kvmlab-dirty`` in the guest writes a line every 10 ms of guest time to the probe port;
the source's and the destination's QEMU append those lines to their own ``probe.log``. A
thread here looks at both files every 2 ms and notes when each grows. The longest
gap between two arrivals around the switch-over is the time the guest made no progress
as an outside observer sees it; the guest's own clock cannot show it under TCG (its
clock stops with it).
"""

from __future__ import annotations

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


class HeartbeatWatch:
    """Arrival times of heartbeats in any of several files (monotonic seconds)."""

    def __init__(self, files: Sequence[Where]) -> None:
        self.files = list(files)
        self.arrivals: list[float] = []
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

    def longest_gap(self, since: float, until: float) -> Gap | None:
        """The longest gap between arrivals in [since, until]; None without two arrivals."""
        times = [t for t in list(self.arrivals) if since <= t <= until]
        if len(times) < 2:
            return None
        best = max(range(1, len(times)), key=lambda i: times[i] - times[i - 1])
        return Gap(times[best] - times[best - 1], times[best - 1])

    def beats(self, since: float, until: float) -> int:
        """How many arrivals fell in [since, until]."""
        return sum(1 for t in list(self.arrivals) if since <= t <= until)
