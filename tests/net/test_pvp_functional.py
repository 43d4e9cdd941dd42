"""The packet path for real: the NIC-less generator and sink on a testpmd switch, a TCG
guest forwarding with testpmd in macswap, all through `kvmlab run`; and Ctrl-C in the
middle of an OVS-DPDK lab's run leaves no testpmd, OVS, QEMU, socket, directory or reserved
huge page behind. OVS-DPDK's loopback and PVP through a guest:
tests/libvirt_backend/test_backend_cli.py (a libvirt domain on the lab's OVS)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import KVMLAB, cli, interrupted_once
from tests.runtime.conftest import pids_mentioning

pytestmark = pytest.mark.functional

LAB = """
name = "pvpt"
[switch]
kind = "KIND"
main_core = 0
cores = "1"

[guests.vm]
vcpus = 2
memory = { size = "1G", backing = "memfd", shared = true }
nics = [{ type = "vhost-user", port = "p0" }, { type = "vhost-user", port = "p1" }]

[bench]
workloads = ["pvp"]

[bench.pvp]
frame_sizes = [64]
seconds = 1
warmup = 0
repetitions = 1
"""


def lab_env(tmp_path: Path, kind: str) -> dict[str, str]:
    (tmp_path / "pvpt.toml").write_text(LAB.replace("KIND", kind))
    return {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "results.sqlite"),
    }


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The testpmd switch's lab. OVS-DPDK's loopback and PVP run through a libvirt domain
    (tests/libvirt_backend/test_backend_cli.py); QEMU as the socket server OVS needs, on
    this backend, in the netcompare test and the Ctrl-C test below."""
    return lab_env(tmp_path, "testpmd")


def leftovers(tmp: Path) -> list[int]:
    """testpmd, OVS and QEMU processes of this test's labs; huge pages kvmlab reserved."""
    return pids_mentioning("kvmlab-pvpt") + pids_mentioning(str(tmp / "run"))


def host_links() -> set[str]:
    """The host's network interfaces (OVS's datapath taps must stay in its namespace)."""
    return {p.name for p in Path("/sys/class/net").iterdir()}


def hugepages() -> int:
    return int(Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages").read_text())


def test_loopback_and_pvp_through_a_guest_count_every_hop(
    env: dict[str, str], tmp_path: Path
) -> None:
    html = tmp_path / "pvp.html"
    pages, links = hugepages(), host_links()
    run = cli(env, "run", str(tmp_path / "pvpt.toml"), "--out", str(html), timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "L0 host pvp 64B" in run.stderr and "L1 vm pvp 64B" in run.stderr
    report = json.loads(cli(env, "report", "last", "-o", "json").stdout)
    rows = {(r["level"], r["metric"]): r for r in report["rows"] if r["workload"] == "pvp"}
    for hop in ("sent", "switch in", "switch out", "received"):
        assert rows[("L0", f"64B {hop}")]["value"] > 0, hop
    for hop in ("switch to guest", "guest in", "guest out", "switch from guest", "received"):
        assert rows[("L1", f"64B {hop}")]["value"] > 0, hop
    # trials count with nothing in flight: no hop passes on more than it was given, and
    # what the guest returned reached the sink (the switch loses nothing on the way back)
    for level, path in (
        ("L0", ("sent", "switch in", "switch out", "received")),
        ("L1", ("switch to guest", "guest in", "guest out", "switch from guest", "received")),
    ):
        for first, then in itertools.pairwise(path):
            given, passed = (rows[(level, f"64B {h}")]["value"] for h in (first, then))
            assert passed <= given * 1.001, (level, first, given, then, passed)
    back, sunk = rows[("L1", "64B guest out")]["value"], rows[("L1", "64B received")]["value"]
    assert sunk == pytest.approx(back, rel=0.05)
    assert rows[("L1", "64B received")]["change_pct"] is not None  # against the loopback
    assert "pvp" in html.read_text()
    assert not leftovers(tmp_path)
    assert not (tmp_path / "run" / "pvpt").exists()
    assert hugepages() == pages  # nothing reserved is left
    assert host_links() == links  # no tap left on the host


def test_ctrl_c_during_pvp_leaves_nothing(tmp_path: Path) -> None:
    """OVS-DPDK: two daemons and the huge pages kvmlab reserved for them."""
    env = lab_env(tmp_path, "ovs-dpdk")
    lab = str(tmp_path / "pvpt.toml")
    pages = hugepages()
    marker = "starting testpmd (macswap)"  # the switch, its huge pages and the guest are up
    status, _, err = interrupted_once(env, marker, 1, "run", lab, "--levels", "L1", on_stderr=True)
    assert status == 130, err[-3000:]
    assert not leftovers(tmp_path)
    assert not (tmp_path / "run" / "pvpt").exists()
    assert hugepages() == pages


def test_up_leaves_the_switch_running_and_down_stops_it(tmp_path: Path) -> None:
    env = lab_env(tmp_path, "testpmd")
    up = cli(env, "up", str(tmp_path / "pvpt.toml"), timeout=900)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert "starting the testpmd switch (ports kvmlab-gen, p0, p1, kvmlab-sink)" in up.stderr
        assert pids_mentioning("kvmlab-pvpt-switch", "dpdk-testpmd")  # outlived `kvmlab up`
        again = cli(env, "up", str(tmp_path / "pvpt.toml"))
        assert again.returncode == 2 and "already up" in again.stderr
    finally:
        down = cli(env, "down", "pvpt", timeout=600)
    assert down.returncode == 0 and "stopped the switch" in down.stderr, down.stderr
    assert not leftovers(tmp_path)


def test_a_switch_killed_mid_run_is_a_clear_failure_and_leaves_nothing(tmp_path: Path) -> None:
    """The loopback's testpmd switch dies (SIGKILL) while the L0 windows run."""
    env = lab_env(tmp_path, "testpmd")
    (tmp_path / "pvpt.toml").write_text(
        LAB.replace("KIND", "testpmd")
        .replace("seconds = 1", "seconds = 3")
        .replace("repetitions = 1", "repetitions = 20")
    )
    proc = subprocess.Popen(
        [KVMLAB, "run", str(tmp_path / "pvpt.toml"), "--levels", "L0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 300
    victims: list[int] = []
    while not victims and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(1)
        victims = pids_mentioning("kvmlab-pvpt-loopback", "dpdk-testpmd")
    assert victims, "the loopback switch never started"
    time.sleep(5)  # inside the measured windows
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err[-3000:]
    # caught between two commands ("... is not running"), in the middle of one ("exited
    # before its answer") or, on a loaded host, still starting: each names it and its log
    assert "loopback" in err and "log" in err, err[-3000:]
    assert "pvp" in err  # the failure is filed where it happened
    assert not leftovers(tmp_path)
    assert not (tmp_path / "run" / "pvpt").exists()


def test_a_guest_that_cannot_take_dpdk_is_a_clear_failure_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """256 MiB of guest RAM cannot hold the 128 huge pages its testpmd needs: the bind step
    says so, and the guest, the switch and the run directory go."""
    env = lab_env(tmp_path, "testpmd")
    (tmp_path / "pvpt.toml").write_text(
        LAB.replace("KIND", "testpmd").replace('size = "1G"', 'size = "256M"')
    )
    run = cli(env, "run", str(tmp_path / "pvpt.toml"), "--levels", "L1", timeout=900)
    assert run.returncode == 3, run.stderr[-3000:]
    assert "huge pages (2 MiB) could be reserved" in run.stderr, run.stderr[-3000:]
    assert not leftovers(tmp_path)
    assert not (tmp_path / "run" / "pvpt").exists()
