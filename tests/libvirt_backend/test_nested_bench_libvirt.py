"""``kvmlab bench --backend libvirt`` of a nested lab: L1 a domain of a real private
libvirtd, L2 started by kvmlab inside it. In the side lane (tests/conftest.py): one guest
hypervisor and its guest on user networking without forwards, nothing asserted against
time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.libvirt_backend.conftest import Daemon

pytestmark = pytest.mark.functional


NESTED = """
name = "lvn"
[guests.l1]
nested = true
vcpus = 1
memory = "2G"
nics = [{ type = "user" }]
[guests.l1.guests.l2]
vcpus = 1
memory = "512M"
nics = [{ type = "user" }]
[bench]
repetitions = 1
warmup = 0
duration = 1
"""


def test_bench_of_a_nested_lab_reaches_l2_through_the_libvirt_guest_hypervisor(
    libvirtd: Daemon, open_dir: Path
) -> None:
    """``kvmlab bench --backend libvirt``: L1 is a libvirt domain (its QEMU as root when
    kvmlab's install or image is closed to libvirt's QEMU user) measured through libvirt's
    agent channel; kvmlab inside it starts L2, L0 reaches L2's agent through the channel
    socket libvirt made; the run records the daemon; everything is stopped and undefined
    afterwards."""
    import libvirt

    lab = open_dir / "lvn.toml"
    lab.write_text(NESTED)
    env = {**libvirtd.env, "KVMLAB_RESULTS": str(open_dir / "results.sqlite")}
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
        "L1,L2",
        "--only",
        "cpu,boot",
        "-o",
        "json",
        timeout=1200,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = json.loads(ran.stdout)
    host = report["runs"][0]["host"]
    assert host["backend"].startswith("libvirt ") and libvirtd.uri in host["backend"]
    rows = {(r["level"], r["workload"]) for r in report["rows"]}
    # L1 measured in the domain, L2 through L1 (a libvirt domain)
    assert rows == {(level, w) for level in ("L1", "L2") for w in ("cpu", "boot")}, rows
    assert "starting the guests of lvn/l1 inside it" in ran.stderr
    conn = libvirt.open(libvirtd.uri)
    try:
        assert conn.listAllDomains(0) == [] and conn.listAllStoragePools(0) == []
    finally:
        conn.close()
    assert not (libvirtd.root / "lvn").exists()
