"""``kvmlab check`` says "ok" to what this host can run, and warns where a lab forces what
this host cannot serve well: ``accel = "kvm"`` where /dev/kvm is software nested KVM (or
missing), which ``auto`` would run under TCG."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

import pytest

from kvmlab.cli import hostinfo
from kvmlab.cli.main import main
from kvmlab.host.accel import AccelChoice
from kvmlab.runtime.hostaccel import HostAccel

PVM = "kvm_pvm is loaded: /dev/kvm is PVM (software nested KVM)"


def run_check(
    lab: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    accel: Literal["kvm", "tcg"],
) -> list[str]:
    choice = AccelChoice(accel, PVM if accel == "tcg" else "hardware", "kvm_pvm")
    monkeypatch.setattr(hostinfo, "host_accel", lambda: (HostAccel(accel, "", None), choice))
    monkeypatch.setattr(sys, "argv", ["kvmlab", "check", str(lab), "-o", "json"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    warnings: list[str] = doc["labs"][0]["host_warnings"]
    return warnings


@pytest.mark.parametrize(("accel", "warned"), [("tcg", True), ("kvm", False)])
def test_forcing_kvm_where_kvm_cannot_serve_is_warned(
    accel: Literal["kvm", "tcg"],
    warned: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lab = tmp_path / "k.toml"
    lab.write_text('name = "k"\n[guests.vm]\naccel = "kvm"\n')
    warnings = run_check(lab, monkeypatch, capsys, accel)
    assert bool(warnings) == warned, warnings
    if warned:
        assert warnings[0].startswith('guests.vm.accel = "kvm": kvm_pvm is loaded')
        assert 'accel = "auto" runs it under TCG here' in warnings[0]


def test_auto_is_never_warned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = tmp_path / "a.toml"
    lab.write_text('name = "a"\n[guests.vm]\n')
    assert run_check(lab, monkeypatch, capsys, "tcg") == []
