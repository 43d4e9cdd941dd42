"""testpmd's counters, read from what DPDK 22.11's testpmd printed here (a loopback run:
generator txonly 64-byte frames -> testpmd io switch -> sink rxonly, --no-huge)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.net.testpmd_stats import (
    PortCounters,
    Snapshot,
    StatsParseError,
    add_fwd_stats,
    parse_port_stats,
    rates,
)

DATA = Path(__file__).parent / "data"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_switch_port_stats_per_port() -> None:
    snap = parse_port_stats(read("switch-port-stats.txt"), 1.0)
    assert sorted(snap.ports) == [0, 1]
    assert snap.ports[0].rx_packets > 0 and snap.ports[0].tx_packets == 0
    assert snap.ports[1].tx_packets > 0 and snap.ports[1].rx_packets == 0
    assert snap.ports[1].tx_bytes == 60 * snap.ports[1].tx_packets  # 64-byte frames, no CRC


def test_fwd_stats_add_the_drops_of_each_port_not_the_accumulated_sum() -> None:
    snap = add_fwd_stats(
        parse_port_stats(read("switch-port-stats.txt"), 1.0), read("switch-fwd-stats.txt")
    )
    assert snap.ports[0].tx_dropped == 0
    assert snap.ports[1].tx_dropped > 0  # the sink could not take them all
    gen = add_fwd_stats(
        parse_port_stats(read("generator-port-stats.txt"), 1.0), read("generator-fwd-stats.txt")
    )
    assert list(gen.ports) == [0] and gen.ports[0].tx_dropped > 0


def test_the_throughput_lines_are_not_read_as_counters() -> None:
    text = read("sink-port-stats.txt").replace("Rx-pps:            0", "Rx-pps:     999999")
    assert parse_port_stats(text, 0).ports[0].rx_packets != 999999


def test_rates_between_two_snapshots() -> None:
    before = Snapshot(10.0, {0: PortCounters(rx_packets=100, tx_packets=50, rx_missed=1)})
    after = Snapshot(
        12.0, {0: PortCounters(rx_packets=2_100_100, tx_packets=50, rx_missed=201, tx_dropped=40)}
    )
    got = rates(before, after)[0]
    assert got.rx_pps == 1_050_000 and got.tx_pps == 0
    assert got.rx_lost_pps == 100 and got.tx_lost_pps == 20


def test_a_counter_reset_between_snapshots_is_no_negative_rate() -> None:
    before = Snapshot(0.0, {0: PortCounters(rx_packets=500)})
    after = Snapshot(1.0, {0: PortCounters(rx_packets=10)})
    assert rates(before, after)[0].rx_pps == 0


@pytest.mark.parametrize("text", ["", "testpmd: Invalid port 9\n", "Bad arguments\n"])
def test_no_counters_is_an_error_naming_what_came(text: str) -> None:
    with pytest.raises(StatsParseError, match="no 'NIC statistics"):
        parse_port_stats(text, 0)


def test_snapshots_out_of_order_are_refused() -> None:
    with pytest.raises(StatsParseError):
        rates(Snapshot(2.0), Snapshot(1.0))
