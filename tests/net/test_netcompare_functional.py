"""netcompare for real: two TCG guests on a lab network (a bridge in the lab's own network
namespace, kvmlab's taps moved onto it), iperf3 and ping between them and to the host side,
the multiqueue NIC's channels set, read back and its spread reported; afterwards no
namespace, tap, bridge, iperf3 or QEMU is left, and the host's interfaces are as before."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cli, interrupted_once
from tests.runtime.conftest import pids_mentioning

pytestmark = pytest.mark.functional

LAB = """
name = "nct"
[networks.lan]
subnet = "10.91.0.0/24"
[guests.a]
vcpus = 2
nics = [{ type = "tap", network = "lan", queues = 2 }]
[guests.b]
nics = [{ type = "tap", network = "lan", address = "10.91.0.20" }]
[bench]
workloads = ["netcompare"]
[bench.netcompare]
seconds = 1
streams = [4]
pings = 10
repetitions = 1
queues = [1, 2]
"""


WITH_USER = LAB.replace(
    'nics = [{ type = "tap", network = "lan", address = "10.91.0.20" }]',
    'nics = [{ type = "tap", network = "lan", address = "10.91.0.20" }, { type = "user" }]',
)
"""The README table's user (slirp) row too: guest b's second NIC, to the host."""
assert WITH_USER != LAB

WITH_OVS = (
    WITH_USER.replace(
        "[guests.a]\n",
        '[switch]\nkind = "ovs-dpdk"\nmain_core = 0\ncores = "1"\nidle_sleep_max_us = 500\n'
        "[guests.a]\n"
        'memory = { size = "512M", backing = "memfd", shared = true }\n',
    )
    .replace(
        "[guests.b]\n",
        '[guests.b]\nmemory = { size = "512M", backing = "memfd", shared = true }\n',
    )
    .replace(
        "queues = 2 }]",
        'queues = 2 }, { type = "vhost-user", port = "a", address = "10.78.0.11/24" }]',
    )
    .replace(
        '{ type = "user" }]',
        '{ type = "user" }, { type = "vhost-user", port = "b", address = "10.78.0.12/24" }]',
    )
)
"""And the README table's vhost-user (OVS-DPDK) row: a port of the lab's OVS-DPDK switch
in each guest (kernel virtio-net on shared memory), guest to guest through the switch. Its
poller sleeps while idle (``idle_sleep_max_us``): spinning, it took one of the host's two
CPUs from the guests for the whole run (141 s against 67 s, measured here)."""
assert WITH_OVS.count("vhost-user") == 2 and WITH_OVS.count("shared = true") == 2


def host_links() -> set[str]:
    return {p.name for p in Path("/sys/class/net").iterdir()}


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "nct.toml").write_text(WITH_USER)
    return {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "results.sqlite"),
    }


def leftovers(tmp: Path) -> list[int]:
    return pids_mentioning(str(tmp / "run")) + pids_mentioning("kvmlab-nct-net")


def test_two_guests_on_a_lab_network_measured_and_nothing_left(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "nct.toml").write_text(WITH_OVS)
    links, spaces = host_links(), namespaces()
    run = cli(env, "run", str(tmp_path / "nct.toml"), "--levels", "L1", timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]
    err = run.stderr
    assert "network namespace kvmlab-nct-net" in err
    rows = json.loads(cli(env, "report", "last", "-o", "json").stdout)["rows"]
    got = {r["metric"]: r for r in rows if r["workload"] == "netcompare"}
    for path in ("tap a-b", "tap a-lan-host", "user (slirp) b-host", "vhost-user (ovs-dpdk) a-b"):
        for metric in ("tcp P4 ->", "tcp P4 <-", "udp 64B ->", "ping p99"):
            assert got[f"{path}: {metric}"]["value"] > 0, (path, metric)
    assert got["tap a-b: 1q tcp P4 ->"]["value"] > 0 and got["tap a-b: 2q tcp P4 ->"]["value"] > 0
    assert got["tap a-b: queue pairs in use"]["value"] == 2  # set, then read back
    assert got["tap a-b: 1q tcp P4 <- rx queues used"]["value"] == 1  # one channel: one queue
    assert "nct/a eth0: 2 of 2 queue pair(s) in use" in run.stdout
    assert "FINDING" not in run.stdout + err, err[-3000:]
    assert "rx irq 2 queues" in err  # the spread, from the guest's /proc/interrupts
    assert "netcompare: every path" in run.stdout and "multiqueue" in run.stdout
    assert host_links() == links and namespaces() == spaces
    assert not leftovers(tmp_path)


def test_ctrl_c_while_measuring_leaves_no_namespace(env: dict[str, str], tmp_path: Path) -> None:
    spaces = namespaces()
    status, _, err = interrupted_once(
        env, " tcp P", 1, "run", str(tmp_path / "nct.toml"), "--levels", "L1", on_stderr=True
    )
    assert status == 130, err[-3000:]
    assert namespaces() == spaces
    assert not leftovers(tmp_path)
    assert not (tmp_path / "run" / "nct").exists()
