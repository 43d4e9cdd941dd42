"""``kvmlab up/ps/exec/down --backend libvirt`` against a real private libvirtd."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KVMLAB, LABS, cli, wait_connected
from tests.libvirt_backend.conftest import Daemon
from tests.net.test_pvp_functional import LAB

pytestmark = pytest.mark.functional


@pytest.fixture
def open_lab() -> Iterator[Path]:
    """The basic lab in a directory libvirt's QEMU user may enter (its disk is created
    beside it): a checkout under /root (a fresh machine's) is closed to that user."""
    where = Path(tempfile.mkdtemp(prefix="kvmlab-lvtest-", dir="/var/tmp"))
    try:
        where.chmod(0o711)
        shutil.copy(LABS / "basic.toml", where / "basic.toml")
        yield where / "basic.toml"
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_a_disk_libvirt_cannot_reach_is_refused_first(libvirtd: Daemon, tmp_path: Path) -> None:
    import libvirt

    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    shutil.copy(LABS / "basic.toml", closed / "basic.toml")
    up = cli(
        libvirtd.env,
        "up",
        str(closed / "basic.toml"),
        "--backend",
        "libvirt",
        "--connect",
        libvirtd.uri,
        timeout=300,
    )
    assert up.returncode == 3, up.stderr
    assert "libvirt's QEMU user cannot reach it" in up.stderr and "fix:" in up.stderr
    conn = libvirt.open(libvirtd.uri)
    try:
        assert conn.listAllDomains(0) == [] and conn.listAllStoragePools(0) == []
    finally:
        conn.close()


def test_basic_lab_up_exec_ps_down(libvirtd: Daemon, open_lab: Path) -> None:
    import libvirt

    env = libvirtd.env
    up = cli(
        env, "up", str(open_lab), "--backend", "libvirt", "--connect", libvirtd.uri, timeout=900
    )
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        ran = cli(env, "exec", "basic/vm1", "--", "cat", "/proc/sys/kernel/hostname")
        assert ran.returncode == 0 and ran.stdout.strip() == "vm1", ran.stderr
        rows = json.loads(cli(env, "ps", "-o", "json").stdout)["guests"]
        assert [(r["address"], r["state"]) for r in rows] == [("basic/vm1", "running")]
        assert rows[0]["pid"]  # the local daemon's QEMU, found by the domain's UUID
        console = subprocess.Popen(
            [KVMLAB, "console", "basic/vm1"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        wait_connected(console)  # attached (libvirt's console stream)
        second = cli(env, "console", "basic/vm1")  # never takes the console over
        assert second.returncode == 3 and "cannot open the serial console" in second.stderr
        said = cli(env, "exec", "basic/vm1", "--", "sh", "-c", "echo hello-console >/dev/ttyS0")
        assert said.returncode == 0, said.stderr
        out, err = console.communicate(timeout=60)  # stdin closed: detaches when quiet
        assert console.returncode == 0 and b"hello-console" in out, err
        again = cli(env, "up", str(open_lab), "--backend", "libvirt", "--connect", libvirtd.uri)
        assert again.returncode != 0  # the lab is up: refused, the running domain untouched
    finally:
        down = cli(env, "down", "basic", timeout=300)
    assert down.returncode == 0, down.stderr
    conn = libvirt.open(libvirtd.uri)
    try:
        assert conn.listAllDomains(0) == []
        assert conn.listAllStoragePools(0) == []
    finally:
        conn.close()


def test_unreachable_uri_is_one_clear_line(tmp_path: Path) -> None:
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    uri = f"qemu+unix:///system?socket={tmp_path}/none.sock"
    up = cli(env, "up", str(LABS / "basic.toml"), "--backend", "libvirt", "--connect", uri)
    assert up.returncode == 4, up.stderr
    assert f"{uri}: no libvirtd answers" in up.stderr and "fix:" in up.stderr
    assert not (tmp_path / "run" / "basic").exists()


def test_bench_refuses_what_libvirt_does_not_run_yet(tmp_path: Path) -> None:
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    ran = cli(
        env,
        "run",
        str(LABS / "nested.toml"),
        "--backend",
        "libvirt",
        "--connect",
        "qemu+tcp://far.example/system",
        "--levels",
        "L2",
    )
    assert ran.returncode == 2, ran.stderr
    assert "--levels L2 on a remote libvirt" in ran.stderr
    ran = cli(env, "run", str(LABS / "migrate.toml"), "--backend", "libvirt")
    assert ran.returncode == 2 and "migrations run only on the qemu backend" in ran.stderr


PVP = LAB.replace('name = "pvpt"', 'name = "lvp"')
"""The packet-path functional tests' lab (a switch of KIND, a guest with two ports)."""


@pytest.mark.parametrize("kind", ["testpmd", "ovs-dpdk"])
def test_pvp_through_a_libvirt_domain_on_the_labs_switch(
    libvirtd: Daemon, tmp_path: Path, kind: str
) -> None:
    """The vhost-user PVP write-up and the networking course lab through libvirt: the lab's
    switch on this host, the guest a libvirt domain whose vhost-user NICs are its ports
    (QEMU the socket's client for testpmd, its server for OVS-DPDK); packets counted at
    every hop."""
    import libvirt

    from tests.runtime.conftest import pids_mentioning

    lab = tmp_path / "lvp.toml"
    lab.write_text(PVP.replace("KIND", kind))
    env = {**libvirtd.env, "KVMLAB_RESULTS": str(tmp_path / "results.sqlite")}
    refused = cli(env, "up", str(lab), "--backend", "libvirt", "--connect", libvirtd.uri)
    assert refused.returncode == 3, refused.stderr  # QEMU as root only when asked
    assert "which kvmlab does only when asked" in refused.stderr
    assert "--qemu-as-root" in refused.stderr and not (libvirtd.root / "lvp").exists()
    ran = cli(
        env,
        "bench",
        str(lab),
        "--backend",
        "libvirt",
        "--connect",
        libvirtd.uri,
        "--qemu-as-root",
        "--levels",
        "L0,L1" if kind == "ovs-dpdk" else "L1",  # OVS's loopback ceiling is tested here only
        "-o",
        "json",
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "libvirt runs its QEMU as root: its vhost-user NICs" in ran.stderr
    pvp = [r for r in json.loads(ran.stdout)["rows"] if r["workload"] == "pvp"]
    rows = {r["metric"]: r["value"] for r in pvp if r["level"] == "L1"}
    assert rows["64B guest out"] > 0 and 0 < rows["64B received"] <= rows["64B guest out"]
    if kind == "ovs-dpdk":
        loop = {r["metric"]: r["value"] for r in pvp if r["level"] == "L0"}
        assert 0 < loop["64B received"] <= loop["64B switch in"] <= loop["64B sent"]
    conn = libvirt.open(libvirtd.uri)
    try:
        assert conn.listAllDomains(0) == []
    finally:
        conn.close()
    assert not pids_mentioning("kvmlab-lvp", "dpdk-testpmd")
    assert not pids_mentioning(str(libvirtd.root / "lvp"))  # OVS's daemons
