"""OVS-DPDK's counters, read from what OVS 3.1.0 (Debian 12) printed here
in a loopback run (generator -> OVS netdev bridge -> sink, 64-byte frames)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from kvmlab.errors import RuntimeFailure
from kvmlab.fabric.ovs import config_commands, flows, mask
from kvmlab.net.ovs_stats import parse_dump_ports
from kvmlab.net.testpmd_stats import StatsParseError
from kvmlab.spec.switch import SwitchSpec

DATA = Path(__file__).parent / "data"


def test_dump_ports_numbers_openflow_ports_from_zero_without_local() -> None:
    snap = parse_dump_ports((DATA / "ovs-dump-ports.txt").read_text(), 3.0)
    assert sorted(snap.ports) == [0, 1]  # OpenFlow 1 (generator), 2 (sink); LOCAL left out
    gen, sink = snap.ports[0], snap.ports[1]
    assert gen.rx_packets == 18485440 and gen.tx_packets == 0
    assert sink.tx_packets == 9460480 and sink.tx_dropped == 13030656  # the sink fell behind
    assert sink.tx_errors == 0  # OVS prints "?" for what vhost ports do not count


def test_no_ports_is_an_error() -> None:
    with pytest.raises(StatsParseError):
        parse_dump_ports("ovs-ofctl: br0 is not a bridge or a socket\n", 0)


def test_bridge_set_up_as_seed_004_with_ports_in_order() -> None:
    spec = SwitchSpec(kind="ovs-dpdk", cores=(2, 3), main_core=0, queues=2)
    cmds = config_commands(spec, [("kvmlab-gen", Path("/r/g.sock")), ("vm0", Path("/r/v.sock"))])
    assert "other_config:pmd-cpu-mask=0xc" in cmds[0]
    assert "other_config:dpdk-lcore-mask=0x1" in cmds[0]
    assert "datapath_type=netdev" in cmds[1]
    assert cmds[3][:3] == ["add-port", "kvbr0", "vm0"]
    assert {
        "type=dpdkvhostuserclient",
        "options:vhost-server-path=/r/v.sock",
        "options:n_rxq=2",
        "ofport_request=2",
    } <= set(cmds[3])
    assert flows(4) == [
        "in_port=1,actions=output:2",
        "in_port=2,actions=output:1",
        "in_port=3,actions=output:4",
        "in_port=4,actions=output:3",
    ]
    assert flows(1) == [] and mask([0, 5]) == "0x21"


def test_idle_sleep_is_set_under_this_ovs_versions_key_and_only_when_asked() -> None:
    ports = [("vm0", Path("/r/v.sock"))]
    quiet = SwitchSpec(kind="ovs-dpdk", idle_sleep_max_us=500)
    assert "other_config:pmd-maxsleep=500" in config_commands(quiet, ports, ovs=(3, 1))[0]
    assert "other_config:pmd-sleep-max=500" in config_commands(quiet, ports, ovs=(3, 3))[0]
    polling = config_commands(SwitchSpec(kind="ovs-dpdk"), ports, ovs=(2, 17))[0]
    assert not [a for a in polling if "sleep" in a], "0 (the default) sets nothing"
    with pytest.raises(RuntimeFailure, match=r"needs OVS 3\.1 or newer"):
        config_commands(quiet, ports, ovs=(3, 0))


def test_idle_sleep_is_refused_for_testpmd() -> None:
    with pytest.raises(ValidationError, match="OVS-DPDK's load-based sleeping"):
        SwitchSpec(kind="testpmd", idle_sleep_max_us=100)


def test_the_sleep_is_read_back_from_ovs_vswitchd_s_log(tmp_path: Path) -> None:
    from kvmlab.fabric.ovs import Ovs

    log = tmp_path / "ovs-vswitchd.log"
    took = "2026-11-27T01:02:03.456Z|00061|dpif_netdev|INFO|PMD max sleep request is 500 usecs."
    log.write_text(f"{took}\n2026-11-27T01:02:03.457Z|00062|dpif_netdev|INFO|other\n")
    Ovs(tmp_path)._check_sleep(500)  # OVS 3.1's line, as it logged it here
    with pytest.raises(RuntimeFailure, match="did not take idle_sleep_max_us = 50 "):
        Ovs(tmp_path)._check_sleep(50)
    log.write_text("2026-11-27T01:02:03.456Z|00061|dpif_netdev|INFO|PMD load based sleeps\n")
    with pytest.raises(RuntimeFailure, match="did not take"):
        Ovs(tmp_path)._check_sleep(500)
