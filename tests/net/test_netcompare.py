"""netcompare's pure parts: the paths a lab offers, the commands on each, the figures read
from recorded iperf3 and ping outputs, the guest snapshot split, the vhost-net fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.bench.parsers import ParseError, parse_iperf3_udp, parse_ping_replies
from kvmlab.bench.plan import plan
from kvmlab.net.multiqueue import sections
from kvmlab.net.netcompare import (
    UDP_OVERHEAD,
    iperf_argv,
    ping_argv,
    plan_paths,
    without_vhost_net,
)
from kvmlab.render.identity import derived_mac, tap_name
from kvmlab.runtime.lab import tap_plans
from kvmlab.spec import LoadedLab, load_lab
from kvmlab.spec.network import addresses

DATA = Path(__file__).parent / "data" / "netcompare"
LABS = Path(__file__).parents[2] / "src" / "kvmlab" / "labs"


@pytest.fixture
def shipped() -> LoadedLab:
    return load_lab(LABS / "netcompare.toml")


def test_the_shipped_lab_offers_seed_004s_paths(shipped: LoadedLab) -> None:
    paths = plan_paths(shipped.lab, "ovs-dpdk")
    assert [p.name for p in paths] == [
        "user (slirp) vm1-host",
        "tap vm1-vm2",
        "tap vm1-lan-host",
        "tap+vhost-net vm1-vm2",
        "tap+vhost-net vm1-vlan-host",
        "vhost-user (ovs-dpdk) vm1-vm2",
    ]
    tap = paths[1]
    assert (tap.a.addr, tap.b.addr, tap.queues) == ("10.77.0.10", "10.77.0.11", 4)
    assert tap.a.mac == derived_mac("netcompare", ("vm1",), 1)
    assert paths[2].b.kind == "netns" and paths[2].b.addr == "10.77.0.1"
    assert paths[0].b.reach == "10.0.2.2" and paths[0].b.addr == "127.0.0.1"  # slirp's host
    assert paths[-1].b.addr == "10.78.0.12"


def test_without_vhost_net_the_other_nics_keep_their_macs(shipped: LoadedLab) -> None:
    lab, dropped = without_vhost_net(shipped.lab)
    assert dropped == ["guests.vm1.nics[3]", "guests.vm2.nics[3]"]
    assert list(lab.networks) == ["lan"]
    assert [n.type for n in lab.guests["vm1"].nics] == ["user", "tap", "vhost-user"]
    for i, nic in enumerate(lab.guests["vm2"].nics):
        assert nic.mac == derived_mac("netcompare", ("vm2",), i)
    names = [p.name for p in plan_paths(lab, "ovs-dpdk")]
    assert "tap+vhost-net vm1-vm2" not in names and "tap vm1-vm2" in names
    assert [p.tap for p in tap_plans(lab, ["vm1"])] == [tap_name("netcompare", ("vm1",), 1)]
    assert addresses(lab)[(("vm1",), 1)].ip.exploded == "10.77.0.10"


def test_commands_bind_to_the_path(shipped: LoadedLab) -> None:
    tap = plan_paths(shipped.lab)[1]
    assert iperf_argv(tap, 5201, 5, 30, True) == [
        "iperf3",
        "-c",
        "10.77.0.11",
        "-p",
        "5201",
        "-P",
        "30",
        "-t",
        "5",
        "--json",
        "-R",
    ]
    udp = iperf_argv(tap, 5201, 2.5, 1, False, 64 - UDP_OVERHEAD)
    assert udp == [
        "iperf3",
        "-c",
        "10.77.0.11",
        "-p",
        "5201",
        "-t",
        "2.5",
        "--json",
        "-u",
        "-b",
        "0",
        "-l",
        "18",
    ]
    assert ping_argv(tap, 200) == ["ping", "-c", "200", "-i", "0.01", "-W", "2", "10.77.0.11"]


def test_udp_rates_from_a_recorded_run() -> None:
    got = {m.name: m.value for m in parse_iperf3_udp((DATA / "iperf3-udp-64B.json").read_text())}
    assert got["sent_mpps"] == pytest.approx(146260 / 1.003798 / 1e6)
    assert got["received_mpps"] == pytest.approx((146260 - 62020) / 1.003798 / 1e6)
    assert got["lost_pct"] == pytest.approx(42.4, abs=0.01)


def test_udp_rates_report_iperf3s_own_error() -> None:
    with pytest.raises(ParseError, match="Connection refused"):
        parse_iperf3_udp((DATA / "iperf3-refused.json").read_text())


def p99(text: str) -> float:
    [metric] = parse_ping_replies(text)
    assert (metric.name, metric.unit) == ("rtt_p99_ms", "ms")
    return metric.value


def test_ping_p99_is_a_nearest_rank_of_every_reply() -> None:
    text = (DATA / "ping-20.txt").read_text()
    times = sorted(float(t.split("time=")[1].split()[0]) for t in text.splitlines() if "time=" in t)
    assert p99(text) == times[-1]  # 99th of 20 is the largest
    many = "\n".join(f"64 bytes from x: icmp_seq={i} ttl=64 time={i}.0 ms" for i in range(1, 201))
    assert p99(many) == 198.0
    with pytest.raises(ParseError):
        p99("ping: connect: Network is unreachable")


def test_snapshot_sections_split_on_markers() -> None:
    got = sections(
        "@@dev eth1\n@@link ../../../virtio3\n@@channels\nChannel parameters for eth1:"
        "\nA: 1\n@@stats\nNIC statistics:\n"
    )
    assert got["dev"] == "eth1" and got["link"] == "../../../virtio3"
    assert got["channels"] == "Channel parameters for eth1:\nA: 1"
    assert got["stats"] == "NIC statistics:"


def test_netcompare_runs_by_default_only_where_the_lab_declares_networks(
    shipped: LoadedLab,
) -> None:
    planned = plan(shipped, None, {"L0", "L1"})
    assert [w.name for w in planned.lab] == ["netcompare"] and not planned.suite_runs
    basic = load_lab(LABS / "basic.toml")
    assert not plan(basic, None, {"L0", "L1"}).lab  # a user NIC alone
    assert [w.name for w in plan(basic, "netcompare", {"L1"}).lab] == ["netcompare"]  # asked


SWITCHED = """name = "sw"
[switch]
kind = "ovs-dpdk"
[networks.lan]
[networks.san]
subnet = "10.79.0.0/24"
[guests.a]
memory = { size = "1G", backing = "memfd", shared = true }
nics = [{ type = "tap", network = "lan" }, { type = "tap", network = "lan" },
        { type = "tap", network = "san" },
        { type = "vhost-user", port = "x", address = "10.78.0.1/24" },
        { type = "vhost-user", port = "z", address = "10.78.1.1/24" }]
[guests.b]
memory = { size = "1G", backing = "memfd", shared = true }
nics = [{ type = "vhost-net", network = "lan" }, { type = "tap", network = "san" },
        { type = "vhost-user", port = "y", address = "10.78.0.2/24" }]
"""


def test_paths_follow_the_switch_pairs_other_guests_and_name_their_network() -> None:
    from kvmlab.fabric.switch import lab_ports
    from kvmlab.net.netcompare import switch_pairs, unpaired
    from kvmlab.spec import parse_lab

    lab = parse_lab(SWITCHED.encode(), "lab.toml")
    names = [p.name for p in plan_paths(lab, "ovs-dpdk")]
    # a's two NICs on lan are not a path between guests: its peer is b; the names repeat
    # across networks, so each says which
    # a's second NIC on lan is no path to another guest: a-b on lan is a's first and b's
    assert names == ["tap/vhost-net a-b", "tap a-lan-host", "tap a-b", "tap a-san-host"]
    two = SWITCHED.replace(
        '{ type = "vhost-net", network = "lan" }', '{ type = "tap", network = "lan" }'
    )
    assert [p.name for p in plan_paths(parse_lab(two.encode(), "lab.toml"))][::2] == [
        "tap via lan a-b",
        "tap via san a-b",
    ]  # the same name twice: each says its network
    # ports in lab order x, z (a's), y (b's): the switch pairs x with z, one guest's two
    assert lab_ports(lab)[:3] == ["x", "z", "y"] and switch_pairs(lab) == []
    why = unpaired(lab)
    assert why[0] == (
        "guests.a.nics[3]: the switch pairs port x with z, which is not another "
        "guest's addressed port in its subnet"
    )
    assert len(why) == 3
