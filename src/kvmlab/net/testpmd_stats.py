"""testpmd's counters as it prints them: ``show port stats all`` and ``show fwd stats all``.

Only counters are read, never testpmd's own ``Rx-pps`` (a rate "since last show", whose
window kvmlab does not control): rates come from two snapshots and the host clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PORT = re.compile(r"NIC statistics for port (\d+)")
_FWD_PORT = re.compile(r"Forward statistics for port (\d+)")
_PAIR = re.compile(r"([A-Za-z][A-Za-z-]*):\s*(\d+)")


class StatsParseError(ValueError):
    """testpmd printed something kvmlab cannot read as counters."""


@dataclass
class PortCounters:
    """One port's counters (packets unless named bytes)."""

    rx_packets: int = 0
    rx_missed: int = 0
    rx_errors: int = 0
    rx_nombuf: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_errors: int = 0
    tx_bytes: int = 0
    tx_dropped: int = 0
    """From ``show fwd stats``: packets the forwarding engine could not queue for TX."""
    rx_dropped: int = 0
    """Dropped on receive where a switch counts it apart from missed (OVS's rx drop)."""


@dataclass
class Snapshot:
    """Every port of one testpmd at one moment (host monotonic clock, seconds)."""

    at: float
    ports: dict[int, PortCounters] = field(default_factory=dict)


_KEYS = {
    "RX-packets": "rx_packets",
    "RX-missed": "rx_missed",
    "RX-errors": "rx_errors",
    "RX-nombuf": "rx_nombuf",
    "RX-bytes": "rx_bytes",
    "TX-packets": "tx_packets",
    "TX-errors": "tx_errors",
    "TX-bytes": "tx_bytes",
}
_FWD_KEYS = {"TX-dropped": "tx_dropped"}
"""testpmd's forwarding "RX-dropped" is the port's imissed again (RX-missed): not added."""


def _blocks(text: str, header: re.Pattern[str]) -> dict[int, str]:
    starts = [(int(m.group(1)), m.start()) for m in header.finditer(text)]
    out = {}
    for i, (port, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(text)
        out[port] = text[start:end]
    return out


def parse_port_stats(text: str, at: float) -> Snapshot:
    """``show port stats all`` as counters per port; :class:`StatsParseError` without any."""
    blocks = _blocks(text, _PORT)
    if not blocks:
        raise StatsParseError(f"no 'NIC statistics for port' in: {text.strip()[:200]!r}")
    snap = Snapshot(at)
    for port, block in blocks.items():
        counters = PortCounters()
        body = block.split("Throughput", 1)[0]  # the pps/bps lines are rates, not counters
        for key, value in _PAIR.findall(body):
            if key in _KEYS:
                setattr(counters, _KEYS[key], int(value))
        snap.ports[port] = counters
    return snap


def add_fwd_stats(snap: Snapshot, text: str) -> Snapshot:
    """Fold ``show fwd stats all``'s per-port drops into ``snap`` (ports it lacks are added)."""
    for port, block in _blocks(text, _FWD_PORT).items():
        block = block.split("Accumulated", 1)[0]  # the sum over all ports follows the last
        counters = snap.ports.setdefault(port, PortCounters())
        for key, value in _PAIR.findall(block):
            if key in _FWD_KEYS:
                setattr(counters, _FWD_KEYS[key], int(value))
    return snap


@dataclass(frozen=True)
class PortRates:
    """Rates of one port over a window, packets per second."""

    rx_pps: float
    tx_pps: float
    rx_lost_pps: float
    """Missed, errors, no mbuf, dropped by the engine."""
    tx_lost_pps: float
    """TX errors and packets the engine could not queue."""
    rx_bps: float
    tx_bps: float


def rates(before: Snapshot, after: Snapshot, seconds: float | None = None) -> dict[int, PortRates]:
    """Per-port rates between two snapshots of the same process: the counts over
    ``seconds``, by default the time between the snapshots."""
    if seconds is None:
        seconds = after.at - before.at
    if seconds <= 0:
        raise StatsParseError("snapshots out of order")
    out = {}
    for port, b in before.ports.items():
        a = after.ports.get(port)
        if a is None:
            continue

        def d(name: str, a: PortCounters = a, b: PortCounters = b) -> float:
            return float(max(getattr(a, name) - getattr(b, name), 0)) / seconds

        out[port] = PortRates(
            rx_pps=d("rx_packets"),
            tx_pps=d("tx_packets"),
            rx_lost_pps=d("rx_missed") + d("rx_errors") + d("rx_nombuf") + d("rx_dropped"),
            tx_lost_pps=d("tx_errors") + d("tx_dropped"),
            rx_bps=8 * d("rx_bytes"),
            tx_bps=8 * d("tx_bytes"),
        )
    return out
