"""The doctor on this very host ("/"): it must not crash; on a PVM host it must say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.host.accel import choose_accel
from kvmlab.host.doctor import run_checks
from kvmlab.host.findings import Status
from kvmlab.host.output import exit_status, findings_to_json
from kvmlab.host.probe import HostProbe

from .trees import by_id


def test_live_host_does_not_crash() -> None:
    probe = HostProbe(Path("/"))
    findings = run_checks(Path("/"), probe=probe)
    accel = choose_accel(Path("/"), probe=probe)
    assert not [f for f in findings if f.id.startswith("error.")]
    assert exit_status(findings) in (0, 1)
    assert findings_to_json(findings, accel)


@pytest.mark.skipif(not Path("/sys/module/kvm_pvm").is_dir(), reason="not a kvm_pvm host")
def test_live_pvm_host() -> None:
    found = by_id(run_checks())
    assert found["kvm.flavour"].status is Status.WARN
    assert "kvm_pvm" in found["kvm.flavour"].summary
    choice = choose_accel()
    assert (choice.accel, choice.flavour) == ("tcg", "kvm_pvm")
    assert "kvm_pvm" in choice.reason
