"""OVS-DPDK's counters: ``ovs-ofctl dump-ports`` (read live from the datapath, unlike the
database's ``statistics`` column, which OVS refreshes every few seconds)."""

from __future__ import annotations

import re

from kvmlab.net.testpmd_stats import PortCounters, Snapshot, StatsParseError

_PORT = re.compile(
    r"^\s*port\s+(\S+?):\s+rx pkts=(\d+), bytes=(\d+), drop=(\d+|\?), "
    r"errs=(\d+|\?).*?\n\s*tx pkts=(\d+), bytes=(\d+), drop=(\d+|\?), "
    r"errs=(\d+|\?)",
    re.MULTILINE,
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
