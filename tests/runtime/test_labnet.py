"""A lab's networks on this host's kernel: the namespace, a bridge per network with its host
address, a tap moved onto its bridge, and everything gone with the namespace."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kvmlab.errors import StateError
from kvmlab.fabric import namespaces
from kvmlab.fabric.lab_networks import LabNet, TapPlan, stop_recorded
from kvmlab.proc.confined import checked_run_root
from kvmlab.spec import parse_lab

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

LAB = """name = "t{pid}"
[networks.lan]
subnet = "10.93.0.0/24"
[networks.san]
subnet = "10.94.0.0/28"
[guests.a]
nics = [{{ type = "tap", network = "lan" }}, {{ type = "tap", network = "san" }}]
"""


@pytest.fixture
def labnet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LabNet:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    lab = parse_lab(LAB.format(pid=os.getpid()).encode(), "lab.toml")
    root = checked_run_root() / lab.name
    root.mkdir(mode=0o700)
    (root / ".kvmlab-owned").write_text("lab\n")
    return LabNet(lab, root / ".net")


def test_bridges_with_host_addresses_a_tap_moved_on_and_all_gone_after(labnet: LabNet) -> None:
    tap = f"kvtt{os.getpid() % 100000}"
    with labnet:
        labnet.start([TapPlan("a", tap, "san")])
        assert json.loads((labnet.dir / "net.json").read_text()) == {"netns": labnet.ns}
        addrs = namespaces.ip("-br", "addr", netns=labnet.ns)
        assert "kvbr0" in addrs and "10.93.0.1/24" in addrs and "10.94.0.1/28" in addrs
        namespaces.ip("tuntap", "add", tap, "mode", "tap")  # QEMU's, in the host's namespace
        labnet.attach(TapPlan("a", tap, "san"))
        assert not Path(f"/sys/class/net/{tap}").exists()
        assert "master kvbr1" in namespaces.ip("link", "show", tap, netns=labnet.ns)
    assert not namespaces.exists(labnet.ns) and not labnet.dir.exists()
    assert not Path(f"/sys/class/net/{tap}").exists()  # gone with the namespace


def test_a_tap_name_taken_on_the_host_is_refused_before_anything_exists(labnet: LabNet) -> None:
    with pytest.raises(StateError, match="exists on the host"):
        labnet.start([TapPlan("a", "lo", "lan")])
    assert not namespaces.exists(labnet.ns) and not labnet.dir.exists()


def test_a_tap_that_never_appeared_is_named(labnet: LabNet) -> None:
    with labnet:
        labnet.start([])
        with pytest.raises(StateError, match="did not appear"):
            labnet.attach(TapPlan("a", "kvtnothere0", "lan"))


def test_a_stale_one_is_cleaned_by_the_labs_name_not_the_records(labnet: LabNet) -> None:
    other = f"kvmlab-u{os.getpid()}-net"  # another lab's, named in a tampered record
    namespaces.create(other)
    try:
        labnet.start([])  # then "crash": the directory is all that is left
        (labnet.dir / "net.json").write_text(json.dumps({"netns": other}))
        assert stop_recorded(labnet.dir, labnet.lab.name)
        assert not namespaces.exists(labnet.ns) and not labnet.dir.exists()
        assert namespaces.exists(other)
    finally:
        namespaces.delete(other)
    assert not stop_recorded(labnet.dir, labnet.lab.name)  # nothing left: nothing to do
