"""OVS-DPDK's counters: ``ovs-ofctl dump-ports`` (read live from the datapath, unlike the
database's ``statistics`` column, which OVS refreshes every few seconds), and readers of
the PMD threads' own view, ``pmd-stats-show`` and ``pmd-rxq-show`` (not yet stored with
the results)."""

from __future__ import annotations

import re

from kvmlab.net.testpmd_stats import PortCounters, Snapshot, StatsParseError

_PORT = re.compile(
    r"^\s*port\s+(\S+?):\s+rx pkts=(\d+), bytes=(\d+), drop=(\d+|\?), "
    r"errs=(\d+|\?).*?\n\s*tx pkts=(\d+), bytes=(\d+), drop=(\d+|\?), "
    r"errs=(\d+|\?)",
    re.MULTILINE,
)
_PMD_PACKETS = re.compile(
    r"pmd thread numa_id \d+ core_id (\d+):\n(?:.*\n)*?\s*packets "
    r"received: (\d+)"
)
_PMD_CYCLES = re.compile(
    r"pmd thread numa_id \d+ core_id (\d+):(?:\n(?!pmd thread|main).*)*?"
    r"\n\s*processing cycles: \d+ \(([\d.]+)%\)"
)


def _n(text: str) -> int:
    return 0 if text == "?" else int(text)


def parse_dump_ports(text: str, at: float) -> Snapshot:
    """Counters per OpenFlow port, numbered from 0 (OpenFlow port 1 is port 0); the
    bridge's LOCAL port is left out."""
    found = _PORT.findall(text)
    if not found:
        raise StatsParseError(f"no port counters in: {text.strip()[:200]!r}")
    snap = Snapshot(at)
    for port, rx, rx_bytes, rx_drop, rx_errs, tx, tx_bytes, tx_drop, tx_errs in found:
        if not port.isdigit():
            continue
        snap.ports[int(port) - 1] = PortCounters(
            rx_packets=int(rx),
            rx_bytes=int(rx_bytes),
            rx_dropped=_n(rx_drop),
            rx_errors=_n(rx_errs),
            tx_packets=int(tx),
            tx_bytes=int(tx_bytes),
            tx_dropped=_n(tx_drop),
            tx_errors=_n(tx_errs),
        )
    return snap


def pmd_processing(text: str) -> dict[int, float]:
    """``pmd-stats-show``: per PMD core, the share of its cycles spent processing packets
    (the rest it polled empty queues), in percent."""
    return {int(core): float(pct) for core, pct in _PMD_CYCLES.findall(text)}


def pmd_packets(text: str) -> dict[int, int]:
    """``pmd-stats-show``: packets received per PMD core."""
    return {int(core): int(n) for core, n in _PMD_PACKETS.findall(text)}


def rxq_placement(text: str) -> dict[str, int]:
    """``pmd-rxq-show``: which PMD core polls each port's queue 0 (port name -> core)."""
    out: dict[str, int] = {}
    core = None
    for line in text.splitlines():
        m = re.match(r"pmd thread numa_id \d+ core_id (\d+):", line.strip())
        if m:
            core = int(m.group(1))
        m = re.match(r"port:\s+(\S+)\s+queue-id:\s+(\d+)", line.strip())
        if m and core is not None and m.group(2) == "0":
            out[m.group(1)] = core
    return out
