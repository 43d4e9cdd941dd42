"""Boot stages, measured on the host: QEMU start, firmware and kernel, init, agent.

The default image's init prints ``kvmlab: <event> t=<guest uptime>`` markers on the
serial console; the host notes when it first sees each one while it waits for the
guest agent (polled every 0.1 s, so each stage is exact to about 0.1 s), so every stage
is a measured host-side interval, not an estimate.
"""

from __future__ import annotations

import time
from pathlib import Path

from kvmlab.guest.initramfs import AGENT_STARTED, INIT_FAILED, INIT_START, MARKER_RE

STAGES = ("qemu", "kernel", "init", "agent", "total")
"""Stage names, in order: QEMU up to QMP; firmware + kernel up to init; init up to the
agent's start; agent start to its first answer; and the total."""


class MarkerWatch:
    """Follows a serial log and notes when each init marker first appears."""

    def __init__(self, log: Path, t0: float) -> None:
        self.log = log
        self.t0 = t0
        self.seen: dict[str, float] = {}
        self.guest_time: dict[str, float] = {}
        self._offset = 0
        self._partial = ""

    def poll(self) -> None:
        """Read what the log gained since the last call."""
        try:
            with self.log.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return
        if not chunk:
            return
        self._offset += len(chunk)
        now = time.monotonic() - self.t0
        text = self._partial + chunk.decode(errors="replace").replace("\r", "")
        lines = text.split("\n")
        self._partial = lines.pop()
        for match in MARKER_RE.finditer("\n".join(lines)):
            event = match["event"]
            self.seen.setdefault(event, now)
            self.guest_time.setdefault(event, float(match["t"]))

    @property
    def failed(self) -> bool:
        """Whether init reported that it failed."""
        return INIT_FAILED in self.seen


def stages(t0: float, t_qmp: float, seen: dict[str, float], t_ready: float) -> dict[str, float]:
    """Seconds per stage; without markers (a disk image) kernel and init are one stage."""
    qemu = t_qmp - t0
    total = t_ready - t0
    start, agent = seen.get(INIT_START), seen.get(AGENT_STARTED)
    if start is None or agent is None:
        return {"qemu": qemu, "guest": total - qemu, "total": total}
    start, agent = max(start, qemu), max(agent, start, qemu)
    return {
        "qemu": qemu,
        "kernel": start - qemu,
        "init": agent - start,
        "agent": max(0.0, total - agent),
        "total": total,
    }
