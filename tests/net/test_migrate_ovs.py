"""A guest on the lab's OVS-DPDK switch migrated there and back through the CLI
(labs/vhost-migrate.toml --variant ovs): each destination QEMU takes the other of its
port's two socket names, and after the switch-over the lab's OVS port, by its own name and
OpenFlow number, is on the destination's socket, the destination's own port gone, and the
guest answers on its packet path there."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli, lab_up

pytestmark = pytest.mark.functional

ADDRESS = "vhost-migrate/vm"


@pytest.fixture(scope="module")
def ovs_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("vhostmigovs")
    with lab_up(tmp, "vhost-migrate.toml", "vhost-migrate", "--variant", "ovs") as env:
        yield env


def ovs_interfaces(env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """The lab's OVS interfaces: name -> (OpenFlow number, vhost-server-path)."""
    switch = Path(env["KVMLAB_RUN_DIR"]) / "vhost-migrate" / ".switch"
    columns = ["--columns=name,ofport,options", "list", "Interface"]
    shown = subprocess.run(
        ["ovs-vsctl", f"--db=unix:{switch / 'db.sock'}", "--format=json", *columns],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out = {}
    for name, ofport, options in json.loads(shown)["data"]:
        paths = dict(options[1]) if options[0] == "map" else {}
        out[name] = (str(ofport), paths.get("vhost-server-path", ""))
    return out


def test_a_guest_on_ovs_migrates_there_and_back_on_the_lab_s_own_port(
    ovs_lab: dict[str, str],
) -> None:
    before = ovs_interfaces(ovs_lab)
    assert before["vm0"][1].endswith("/vm0.sock"), before
    for there in ("vm0.b.sock", "vm0.sock"):  # each destination takes the other name
        run = cli(ovs_lab, "migrate", ADDRESS, "--dirty", "10", "--dirty-mem", "32", "-o", "json")
        assert run.returncode == 0, run.stderr[-3000:]
        out = json.loads(run.stdout)
        assert out["verdict"] == "VERIFIED"
        check = next(c for c in out["checks"]["after"] if c["name"] == "packet path")
        assert check["ok"], check  # OVS forwards to the destination
        assert "ovs-dpdk switch port vm0" in out["packet_path"]["path"]
        now = ovs_interfaces(ovs_lab)
        # the lab's port, by its name and OpenFlow number, on the destination's socket;
        # the destination's own port gone
        assert now["vm0"] == (before["vm0"][0], before["vm0"][1].replace("vm0.sock", there))
        assert "vm0.next" not in now and "vm1.next" not in now, now
