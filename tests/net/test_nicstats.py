"""Multiqueue verification of a virtio-net NIC, read from recorded and constructed guest
output (tests/net/data/nic/README.md says which is which)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.bench.parsers.errors import ParseError
from kvmlab.net.nicstats import (
    Balance,
    NicSnapshot,
    QueueCounters,
    Vectors,
    check_multiqueue,
    parse_channels,
    parse_interrupts,
    parse_queue_counters,
    spread,
    virtio_device,
)

DATA = Path(__file__).parent / "data" / "nic"


def read(name: str) -> str:
    return (DATA / name).read_text()


def snap(ethtool_s: str, interrupts: str, device: str = "virtio2") -> NicSnapshot:
    return NicSnapshot(
        parse_queue_counters(read(ethtool_s)), parse_interrupts(read(interrupts), device)
    )


def traffic(rx: list[int], tx: list[int] | None = None) -> dict[int, QueueCounters]:
    """Counters of a 6.1 guest holding ``rx``/``tx`` packets per queue."""
    tx = tx or [0] * len(rx)
    return {
        q: QueueCounters({"packets": r}, {"packets": t})
        for q, (r, t) in enumerate(zip(rx, tx, strict=True))
    }


# ethtool -l


def test_recorded_single_queue_virtio_nic() -> None:
    ch = parse_channels(read("ethtool-l-eth0.txt"))
    assert ch.device == "eth0"
    assert ch.maximum.combined == 1 and ch.current.combined == 1
    assert ch.maximum.rx is None and ch.current.other is None  # "n/a"


def test_constructed_four_queue_nic_with_ethtool_l_not_applied() -> None:
    ch = parse_channels(read("mq4-ethtool-l-not-applied.txt"))
    assert (ch.device, ch.maximum.combined, ch.current.combined) == ("enp0s3", 4, 1)


def test_ioctl_ethtool_prints_zeros_instead_of_na() -> None:
    text = (
        "Channel parameters for ens3:\nPre-set maximums:\nRX:\t\t0\nTX:\t\t0\nOther:\t\t0\n"
        "Combined:\t8\nCurrent hardware settings:\nRX:\t\t0\nTX:\t\t0\nOther:\t\t0\n"
        "Combined:\t2\n"
    )
    ch = parse_channels(text)
    assert ch.maximum.rx == 0 and ch.maximum.combined == 8 and ch.current.combined == 2


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (read("ethtool-l-lo.txt"), "Operation not supported"),  # recorded: lo, netlink
        ("Cannot get device channel parameters\n: Operation not supported\n", "not supported"),
        ("", "no output"),
    ],
)
def test_channels_errors_name_what_ethtool_said(text: str, said: str) -> None:
    with pytest.raises(ParseError, match="ethtool -l") as err:
        parse_channels(text)
    assert said in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        read("ethtool-l-eth0.txt").replace("Combined:\t1\nCurrent", "Current"),
        read("ethtool-l-eth0.txt").split("Current")[0],  # cut short
    ],
)
def test_channels_without_combined_in_both_blocks_is_an_error(text: str) -> None:
    with pytest.raises(ParseError, match="no 'Combined:'"):
        parse_channels(text)


# ethtool -S


def test_recorded_linux_6_18_counters_have_no_per_queue_packets() -> None:
    counters = parse_queue_counters(read("ethtool-S-eth0-before.txt"))
    assert list(counters) == [0]  # the totals (rx_drops, tx_kicks) are no queue
    q = counters[0]
    assert q.rx["kicks"] == 61647 and q.tx["kicks"] == 130367 and q.tx["tx_timeouts"] == 0
    assert q.packets("rx") is None and q.packets("tx") is None


def test_linux_6_1_counters_of_four_queues() -> None:
    counters = parse_queue_counters(read("mq4-ethtool-S-after.txt"))
    assert sorted(counters) == [0, 1, 2, 3]
    assert counters[1].packets("rx") == 603_283
    assert counters[3].tx["tx_timeouts"] == 0 and counters[3].packets("tx") == 42_148
    assert set(counters[0].rx) == {
        "packets",
        "bytes",
        "drops",
        "xdp_packets",
        "xdp_tx",
        "xdp_redirects",
        "xdp_drops",
        "kicks",
    }


def test_linux_6_10_device_stats_count_as_packets() -> None:
    text = (
        "NIC statistics:\n     rx_drops: 0\n     rx0_kicks: 5\n     rx0_hw_packets: 70\n"
        "     rx1_kicks: 2\n     rx1_hw_packets: 30\n     tx0_kicks: 1\n     tx1_kicks: 9\n"
    )
    counters = parse_queue_counters(text)
    assert counters[1].packets("rx") == 30 and counters[1].tx == {"kicks": 9}
    assert counters[0].packets("tx") is None


@pytest.mark.parametrize("name", ["ethtool-S-lo.txt", "ethtool-i-eth0.txt", "ethtool-l-eth0.txt"])
def test_no_per_queue_counters_is_an_error(name: str) -> None:
    with pytest.raises(ParseError, match="ethtool -S"):
        parse_queue_counters(read(name))


def test_statistics_without_queues_are_not_virtio_net() -> None:
    with pytest.raises(ParseError, match="not virtio_net"):
        parse_queue_counters("NIC statistics:\n     rx_packets: 5\n     tx_packets: 3\n")


# /sys/class/net/DEV/device


@pytest.mark.parametrize(
    ("link", "device"),
    [
        ("../../../virtio2", "virtio2"),  # recorded: readlink /sys/class/net/eth0/device
        ("/sys/devices/pci0000:00/0000:00:03.0/virtio12\n", "virtio12"),
        ("../../../0000:00:02.0", None),  # e1000e: the PCI function itself
        ("../../../virtio", None),
    ],
)
def test_virtio_device_from_the_device_link(link: str, device: str | None) -> None:
    assert virtio_device(link) == device


# /proc/interrupts


def test_recorded_interrupts_of_the_single_queue_nic() -> None:
    v = parse_interrupts(read("interrupts-before.txt"), "virtio2")
    assert v.mode == "per-queue"
    assert v.queues("input") == {0: 178_604} and v.queues("output") == {0: 123_420}
    assert v.per_cpu["config"] == (0, 0)
    assert v.cpus() == {0: 123_420, 1: 178_604}


def test_other_virtio_devices_are_not_nic_queues() -> None:
    vsock = parse_interrupts(read("interrupts-before.txt"), "virtio3")  # rx, tx, event
    assert vsock.mode == "per-queue" and vsock.queues("input") == {}
    keyboard = parse_interrupts(read("interrupts-before.txt"), "virtio4")  # virtio-input
    assert keyboard.queues("input") == {} and "input" in keyboard.per_cpu


def test_four_queues_sum_over_cpus() -> None:
    v = parse_interrupts(read("mq4-interrupts-after.txt"), "virtio2")
    assert v.queues("input") == {0: 89_608, 1: 81_289, 2: 80_106, 3: 78_720}
    assert sorted(v.queues("output")) == [0, 1, 2, 3]
    assert v.cpus()[0] == 89_608 + 32_044 + 80_106 + 27_804


def test_shared_vector_and_intx_line() -> None:
    shared = parse_interrupts(read("msix-shared-interrupts.txt"), "virtio2")
    assert shared.mode == "shared" and shared.queues("input") == {}
    assert shared.per_cpu["virtqueues"] == (181_204, 166_930)
    intx = parse_interrupts(read("intx-interrupts.txt"), "virtio2")
    assert intx.mode == "intx" and intx.per_cpu[""] == (170_455, 158_020)


def test_an_intx_line_shared_with_another_device() -> None:
    text = "      CPU0  CPU1\n 11:  7  5  IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio2\n"
    assert parse_interrupts(text, "virtio2").per_cpu == {"": (7, 5)}


def test_a_device_name_is_not_a_prefix_match() -> None:
    text = (
        "   CPU0\n 30:  9  PCI-MSI 1-edge  virtio21-input.0\n"
        " 31:  4  PCI-MSI 2-edge  virtio2-input.0\n"
    )
    assert parse_interrupts(text, "virtio2").per_cpu == {"input.0": (4,)}


def test_interrupt_errors() -> None:
    with pytest.raises(ParseError, match="no interrupt of virtio7"):
        parse_interrupts(read("interrupts-before.txt"), "virtio7")
    with pytest.raises(ParseError, match="not /proc/interrupts"):
        parse_interrupts(read("ethtool-S-eth0-before.txt"), "virtio2")
    with pytest.raises(ParseError, match="/proc/interrupts"):
        parse_interrupts("", "virtio2")


# check_multiqueue


def test_asked_four_but_the_device_offers_one_names_queues_and_mq() -> None:
    ch = parse_channels(read("ethtool-l-eth0.txt"))
    vectors = parse_interrupts(read("interrupts-before.txt"), "virtio2")
    [finding] = check_multiqueue(4, ch, vectors)
    assert "offers 1 queue pair" in finding.what and "4 asked" in finding.what
    assert "queues=" in finding.reason and "mq=on" in finding.reason
    assert "queues=4" in finding.fix and "vectors=10" in finding.fix


def test_the_fix_scales_with_the_queues_asked() -> None:
    [finding] = check_multiqueue(2, parse_channels(read("mq1-ethtool-l.txt")), None)
    assert finding.fix == "-netdev ...,queues=2 -device virtio-net-pci,...,mq=on,vectors=6"


def test_four_queues_asked_and_working() -> None:
    ch = parse_channels(read("mq4-ethtool-l.txt"))
    vectors = parse_interrupts(read("mq4-interrupts-after.txt"), "virtio2")
    assert check_multiqueue(4, ch, vectors) == []
    assert check_multiqueue(2, ch, vectors) == []  # fewer than offered is fine


def test_ethtool_l_not_applied() -> None:
    ch = parse_channels(read("mq4-ethtool-l-not-applied.txt"))
    [finding] = check_multiqueue(4, ch, None)
    assert "1 of 4" in finding.what and "ethtool -L" in finding.reason
    assert finding.fix == "ethtool -L enp0s3 combined 4"


def test_a_shared_msix_vector_names_vectors() -> None:
    ch = parse_channels(read("mq4-ethtool-l.txt"))
    [finding] = check_multiqueue(
        4, ch, parse_interrupts(read("msix-shared-interrupts.txt"), "virtio2")
    )
    assert "virtio2-virtqueues" in finding.what and "vectors=" in finding.reason
    assert "vectors=10" in finding.fix


def test_intx_names_msix_off_and_microvm() -> None:
    ch = parse_channels(read("mq4-ethtool-l.txt"))
    [finding] = check_multiqueue(4, ch, parse_interrupts(read("intx-interrupts.txt"), "virtio2"))
    assert "vectors=0" in finding.reason and "virtio-mmio" in finding.reason


def test_too_few_per_queue_vectors() -> None:
    ch = parse_channels(read("mq4-ethtool-l.txt"))
    two = Vectors(
        "virtio2",
        {"config": (0,), "input.0": (1,), "output.0": (1,), "input.1": (1,), "output.1": (1,)},
    )
    [finding] = check_multiqueue(4, ch, two)
    assert "2 queue pair(s)" in finding.what and "vectors=10" in finding.fix


def test_one_queue_asked_needs_nothing() -> None:
    ch = parse_channels(read("ethtool-l-eth0.txt"))
    assert check_multiqueue(1, ch, parse_interrupts(read("intx-interrupts.txt"), "virtio2")) == []


def test_several_causes_are_all_reported() -> None:
    ch = parse_channels(read("mq4-ethtool-l-not-applied.txt"))
    found = check_multiqueue(4, ch, parse_interrupts(read("msix-shared-interrupts.txt"), "virtio2"))
    assert [f.fix.split()[0] for f in found] == ["ethtool", "-device"]


# spread


def test_four_streams_spread_over_four_queues() -> None:
    s = spread(
        snap("mq4-ethtool-S-before.txt", "mq4-interrupts-before.txt"),
        snap("mq4-ethtool-S-after.txt", "mq4-interrupts-after.txt"),
    )
    assert s.rx is not None and s.tx is not None and s.rx_irq is not None
    assert str(s.rx) == "rx 4 queues: 27/25/24/24 %"
    assert s.rx.deltas == (651_433, 602_881, 578_010, 579_347)
    assert s.rx.carrying() == 4 and 27 < s.rx.busiest_share < 28
    assert s.tx.carrying() == 4
    assert str(s.rx_irq) == "rx irq 4 queues: 27/25/24/24 %"
    assert s.cpu_irq is not None and s.cpu_irq.carrying() == 2
    assert s.notes == ()


def test_two_of_four_queues_carry_the_traffic() -> None:
    before = NicSnapshot(traffic([100, 100, 100, 100]))
    after = NicSnapshot(traffic([520_100, 100, 480_100, 9_100]))
    s = spread(before, after)
    assert s.rx is not None
    assert str(s.rx) == "rx 4 queues: 51/0/48/1 %"
    assert s.rx.carrying() == 2 and s.rx.carrying(1.0) == 2 and s.rx.carrying(0.5) == 3
    assert s.rx.busiest_share == pytest.approx(100 * 520_000 / 1_009_000)


def test_one_queue_carrying_everything() -> None:
    s = spread(NicSnapshot(traffic([0, 0, 0, 0])), NicSnapshot(traffic([0, 0, 7_000, 0])))
    assert s.rx is not None and s.rx.carrying() == 1 and s.rx.busiest_share == 100
    assert str(s.rx) == "rx 4 queues: 0/0/100/0 %"


def test_recorded_linux_6_18_run_spreads_by_interrupts_only() -> None:
    s = spread(
        snap("ethtool-S-eth0-before.txt", "interrupts-before.txt"),
        snap("ethtool-S-eth0-after.txt", "interrupts-after.txt"),
    )
    assert s.rx is None and s.tx is None
    assert any("6.10" in note for note in s.notes)
    assert s.rx_irq is not None and s.rx_irq.deltas == (15,)
    assert str(s.rx_irq) == "rx irq 1 queue: 100 %"
    assert s.tx_irq is not None and s.tx_irq.deltas == (19,)


def test_queues_limits_vectors_to_the_pairs_in_use() -> None:
    def eight(n: int) -> Vectors:
        return Vectors("virtio2", {f"input.{q}": (n * (q < 4),) for q in range(8)})

    s = spread(NicSnapshot(traffic([0] * 4), eight(0)), NicSnapshot(traffic([5] * 4), eight(9)))
    assert s.rx_irq is not None and len(s.rx_irq.deltas) == 8 and s.rx_irq.carrying() == 4
    s = spread(
        NicSnapshot(traffic([0] * 4), eight(0)), NicSnapshot(traffic([5] * 4), eight(9)), queues=4
    )
    assert s.rx_irq is not None and s.rx_irq.deltas == (9, 9, 9, 9)
    s = spread(NicSnapshot(traffic([0] * 2)), NicSnapshot(traffic([5] * 2)), queues=4)
    assert s.rx is not None and str(s.rx) == "rx 4 queues: 50/50/0/0 %"  # missing queues: 0


def test_shared_vector_cannot_show_the_spread() -> None:
    v = parse_interrupts(read("msix-shared-interrupts.txt"), "virtio2")
    s = spread(NicSnapshot(traffic([0, 0]), v), NicSnapshot(traffic([3, 1]), v))
    assert s.rx_irq is None and s.tx_irq is None
    assert any("no per-queue vectors (shared)" in note for note in s.notes)
    assert s.lines()[0] == "rx 2 queues: 75/25 %"


def test_a_counter_reset_is_no_negative_delta() -> None:
    s = spread(NicSnapshot(traffic([500, 10])), NicSnapshot(traffic([20, 30])))
    assert s.rx is not None and s.rx.deltas == (0, 20)


def test_percents_always_sum_to_100() -> None:
    assert Balance("rx", (1, 1, 1)).percents() == [34, 33, 33]
    assert sum(Balance("rx", (3, 3, 3, 3, 3, 3, 2)).percents()) == 100
    assert Balance("rx", (0, 0)).percents() == [0, 0]


def test_no_traffic() -> None:
    b = Balance("tx", (0, 0, 0, 0))
    assert str(b) == "tx 4 queues: no traffic"
    assert b.carrying() == 0 and b.busiest_share == 0
