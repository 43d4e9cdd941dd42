"""A switch that cannot start says what is missing and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import RuntimeFailure
from kvmlab.fabric.switch import Switch
from kvmlab.spec.switch import SwitchSpec


@pytest.mark.parametrize(
    ("kind", "module", "says"),
    [
        ("ovs-dpdk", "kvmlab.fabric.ovs.shutil.which", "apt-get install openvswitch-switch-dpdk"),
        ("testpmd", "kvmlab.fabric.switch.shutil.which", "apt-get install dpdk-dev"),
    ],
)
def test_a_missing_switch_program_is_named_and_nothing_is_created(
    kind: str, module: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, lambda _: None)
    root = tmp_path / "run" / "lab" / ".switch"
    with pytest.raises(RuntimeFailure, match=says):
        Switch("lab", SwitchSpec(kind=kind), root, ["a", "b"]).start()
    assert not (tmp_path / "run").exists()
