"""A guest NIC's multiqueue, verified in the guest: its channels set and read back
(``ethtool -L``/``-l``), its vectors in ``/proc/interrupts``, and how a run's packets and
interrupts spread over the queues (one agent exec per snapshot)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvmlab.bench.parsers.errors import ParseError
from kvmlab.errors import RuntimeFailure
from kvmlab.net.nicstats import (
    Channels,
    MqFinding,
    NicSnapshot,
    Spread,
    check_multiqueue,
    parse_channels,
    parse_interrupts,
    parse_queue_counters,
    spread,
    virtio_device,
)
from kvmlab.results.model import Sample
from kvmlab.runtime.machine import Machine

_FIND = (
    'dev=; for d in /sys/class/net/*; do [ "$(cat $d/address)" = "{mac}" ] && '
    "dev=${{d##*/}}; done; "
    '[ -n "$dev" ] || {{ echo "no NIC with MAC {mac}" >&2; exit 1; }}; '
)
_SNAPSHOT = (
    'echo "@@dev $dev"; echo "@@link $(readlink /sys/class/net/$dev/device)"; '
    "echo @@channels; ethtool -l $dev 2>&1; echo @@stats; ethtool -S $dev 2>&1; "
    "echo @@interrupts; cat /proc/interrupts"
)


def sections(text: str) -> dict[str, str]:
    """``@@name rest`` markers split the snapshot's output (``rest`` kept for one-liners)."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("@@"):
            name, _, rest = line[2:].partition(" ")
            out[name] = [rest] if rest else []
        elif name:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@dataclass
class QueueWatch:
    """The multiqueue NIC (by MAC) of one guest, asked for ``asked`` queue pairs."""

    vm: Machine
    mac: str
    asked: int
    device: str = ""
    channels: Channels | None = None
    findings: list[MqFinding] = field(default_factory=list)
    spreads: dict[str, Spread] = field(default_factory=dict)
    _before: NicSnapshot | None = None

    def _exec(self, script: str, what: str) -> str:
        done = self.vm.exec(["sh", "-c", _FIND.format(mac=self.mac) + script], timeout=120)
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip()[-300:]
            raise RuntimeFailure(f"{self.vm.config.name}: {what} failed: {why}")
        return done.stdout.decode(errors="replace")

    def snapshot(self) -> NicSnapshot:
        """Channels, per-queue counters and vectors now (channels and findings kept)."""
        parts = sections(self._exec(_SNAPSHOT, "reading the NIC's queues"))
        self.device = parts.get("dev", "").strip()
        self.channels = parse_channels(parts.get("channels", ""))
        virtio = virtio_device(parts.get("link", ""))
        vectors = None
        if virtio is not None:
            try:
                vectors = parse_interrupts(parts.get("interrupts", ""), virtio)
            except ParseError:
                vectors = None
        try:
            counters = parse_queue_counters(parts.get("stats", ""))
        except ParseError:
            counters = {}
        self.findings = check_multiqueue(self.asked, self.channels, vectors)
        return NicSnapshot(counters, vectors)

    def set_channels(self, count: int) -> None:
        """``ethtool -L DEV combined count`` (a refusal shows in the next check)."""
        self._exec(f'ethtool -L "$dev" combined {count} 2>&1 || true', "ethtool -L")

    def before(self) -> None:
        """The snapshot a run's spread starts from."""
        self._before = self.snapshot()

    def after(self, label: str, queues: int | None = None) -> Spread:
        """The spread since :meth:`before`, kept under ``label``."""
        assert self._before is not None, "before() first"
        got = spread(self._before, self.snapshot(), queues or self.asked)
        self.spreads[label] = got
        return got

    def report(self, prefix: str = "") -> list[str]:
        """What a user reads: channels in use, findings with their fix, one line per spread."""
        name = f"{prefix}{self.vm.config.name} {self.device or self.mac}"
        cur = self.channels.current.combined if self.channels else None
        out = [f"{name}: {cur} of {self.asked} queue pair(s) in use"]
        out += [f"{name}: FINDING {f.what}: {f.reason}; fix: {f.fix}" for f in self.findings]
        for label, got in self.spreads.items():
            out.append(f"{name} {label}: {'; '.join(got.lines())}")
        return out

    def document(self) -> dict[str, Any]:
        """Findings and spreads, kept with the run."""
        cur = self.channels.current.combined if self.channels else None
        return {
            "guest": self.vm.config.name,
            "device": self.device,
            "mac": self.mac,
            "asked": self.asked,
            "in_use": cur,
            "findings": [asdict(f) for f in self.findings],
            "spreads": {k: v.lines() for k, v in self.spreads.items()},
        }

    def samples(self, variant: str, workload: str, prefix: str, accel: str) -> list[Sample]:
        """Queue pairs in use and, per spread, the busiest RX queue's share of the packets
        (of the interrupts where the guest does not count packets per queue) and how many
        queues carried at least 5 %."""
        guest = "/".join(self.vm.config.address)
        cur = self.channels.current.combined if self.channels else 0

        def sample(metric: str, value: float, unit: str, better: bool) -> Sample:
            return Sample(
                variant,
                guest,
                "L1",
                accel,
                workload,
                f"{prefix}{metric}",
                value,
                unit,
                better,
                0,
                "ethtool -l/-S, /proc/interrupts",
            )

        out = [sample("queue pairs in use", float(cur or 0), "count", True)]
        for label, got in self.spreads.items():
            bal = got.rx if got.rx is not None and got.rx.total else got.rx_irq
            if bal is not None and bal.total:
                out.append(sample(f"{label} busiest rx queue", bal.busiest_share, "%", False))
                out.append(sample(f"{label} rx queues used", float(bal.carrying()), "count", True))
        return out
