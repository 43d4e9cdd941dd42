"""A lab's ``[networks]`` with libvirt domains: libvirt makes each guest's tap (by the name
kvmlab derives), kvmlab moves it into the lab's namespace onto the network's bridge as soon
as the domain runs, and netcompare measures the paths; afterwards no domain, tap,
namespace or iperf3 is left, and the host's interfaces are as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli, interrupted_once
from tests.libvirt_backend.conftest import Daemon
from tests.net.test_netcompare_functional import LAB, host_links, namespaces
from tests.runtime.conftest import pids_mentioning

pytestmark = pytest.mark.functional


def test_netcompare_over_a_lab_network_of_libvirt_domains(libvirtd: Daemon, tmp_path: Path) -> None:
    import libvirt

    lab = tmp_path / "lvnet.toml"
    # the channel counts 1 then 2 are set and read back in the qemu backend's test; here
    # the libvirt-made multiqueue tap is measured at 2 (18 s less)
    assert "queues = [1, 2]" in LAB
    lab.write_text(LAB.replace('name = "nct"', 'name = "lvnet"').replace("[1, 2]", "[2]"))
    env = {**libvirtd.env, "KVMLAB_RESULTS": str(tmp_path / "results.sqlite")}
    links, spaces = host_links(), namespaces()
    run = cli(
        env,
        "run",
        str(lab),
        "--backend",
        "libvirt",
        "--connect",
        libvirtd.uri,
        "--levels",
        "L1",
        timeout=1500,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert "network namespace kvmlab-lvnet-net" in run.stderr
    stored = json.loads(cli(env, "report", "last", "-o", "json").stdout)
    assert stored["runs"][0]["host"]["backend"].startswith("libvirt ")
    rows = stored["rows"]
    got = {r["metric"]: r for r in rows if r["workload"] == "netcompare"}
    for path in ("tap a-b", "tap a-lan-host"):
        for metric in ("tcp P4 ->", "udp 64B ->", "ping p99"):
            assert got[f"{path}: {metric}"]["value"] > 0, (path, metric)
    assert got["tap a-b: queue pairs in use"]["value"] == 2  # libvirt's multiqueue tap
    assert host_links() == links and namespaces() == spaces
    assert not pids_mentioning("kvmlab-lvnet-net")
    conn = libvirt.open(libvirtd.uri)
    try:
        assert conn.listAllDomains(0) == [] and conn.listAllStoragePools(0) == []
    finally:
        conn.close()


def test_ctrl_c_while_measuring_leaves_nothing_in_libvirt_or_the_host(
    libvirtd: Daemon, tmp_path: Path
) -> None:
    """Ctrl-C in the middle of a libvirt run: the domains are destroyed, the namespace and
    its taps deleted, the uploads removed, the run directory gone, exit status 130."""
    import libvirt

    lab = tmp_path / "lvint.toml"
    lab.write_text(LAB.replace('name = "nct"', 'name = "lvint"'))
    env = {**libvirtd.env, "KVMLAB_RESULTS": str(tmp_path / "results.sqlite")}
    links, spaces = host_links(), namespaces()
    status, _, err = interrupted_once(
        env,
        " tcp P",  # measuring: both domains up, iperf3 running between them
        1,
        "run",
        str(lab),
        "--backend",
        "libvirt",
        "--connect",
        libvirtd.uri,
        "--levels",
        "L1",
        on_stderr=True,
    )
    assert status == 130, err[-3000:]
    assert "starting lvint/b" in err
    assert host_links() == links and namespaces() == spaces
    assert not (libvirtd.root / "lvint").exists()
    conn = libvirt.open(libvirtd.uri)
    try:
        assert conn.listAllDomains(0) == [] and conn.listAllStoragePools(0) == []
    finally:
        conn.close()
