"""``check``'s summary of each guest is what runs on this host: under TCG with its
``when_tcg`` applied (and said), as written under KVM, a lab's own accel winning over the
host's, and the same vCPUs ``render`` gives. Nothing boots."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvmlab.cli.main import app
from kvmlab.host.accel import AccelChoice
from kvmlab.render import Accel
from kvmlab.runtime.hostaccel import HostAccel
from tests.conftest import LABS
from tests.spec.labcheck import HEAD, KVMLAB, check


def invoke_check(monkeypatch: pytest.MonkeyPatch, accel: Accel, *args: str) -> str:
    """``kvmlab check`` in-process on a host whose accel=auto gives ``accel``."""
    host = HostAccel(accel, "test", "svm")
    choice = AccelChoice(accel, "test", "kvm_amd")
    monkeypatch.setattr("kvmlab.cli.hostinfo.host_accel", lambda: (host, choice))
    result = CliRunner().invoke(app, ["check", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_summary_applies_when_tcg_on_a_tcg_host(monkeypatch: pytest.MonkeyPatch) -> None:
    out = invoke_check(monkeypatch, "tcg", str(LABS / "nested.toml"))
    l1, l2 = out.splitlines()[1:]
    assert l1 == (
        "  L1 l1: guest hypervisor 1 vCPU, 4G anonymous RAM, 2 disk(s), NICs: user, "
        "cpu host-passthrough; under TCG here, with its when_tcg (vcpus)"
    )
    assert l2.startswith("  L2 l1/l2: 2 vCPU,"), "L2 runs under KVM inside l1, as render says"


def test_the_summary_is_the_lab_as_written_on_a_kvm_host(monkeypatch: pytest.MonkeyPatch) -> None:
    out = invoke_check(monkeypatch, "kvm", str(LABS / "nested.toml"))
    assert out.splitlines()[1].startswith("  L1 l1: guest hypervisor 2 vCPU,")
    assert "when_tcg" not in out


def test_a_nic_added_under_tcg_is_in_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(HEAD + 'when_tcg = { nics = [{ type = "user" }], memory = "2G" }\n')
    out = invoke_check(monkeypatch, "tcg", str(lab))
    assert out.splitlines()[1] == (
        "  L1 vm: 1 vCPU, 2G anonymous RAM, 0 disk(s), NICs: user, cpu host-passthrough; "
        "under TCG here, with its when_tcg (nics, memory)"
    )
    doc = json.loads(invoke_check(monkeypatch, "tcg", str(lab), "-o", "json"))
    (vm,) = doc["labs"][0]["guests"]
    assert (vm["nics"], vm["accel"], vm["when_tcg_applied"]) == (["user"], "tcg", True)


def test_accel_set_in_the_lab_wins_over_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(HEAD + 'accel = "tcg"\nvcpus = 2\nwhen_tcg = { vcpus = 1 }\n')
    assert "1 vCPU" in invoke_check(monkeypatch, "kvm", str(lab))


def test_the_summary_matches_render_on_this_host() -> None:
    """Installed command, this host's own accelerator: check says what render gives."""
    nested = str(LABS / "nested.toml")
    rendered = subprocess.run(
        [KVMLAB, "render", nested, "-g", "l1"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    summary = check(Path(nested))
    assert rendered.returncode == 0 and summary.returncode == 0, rendered.stderr
    argv = [line.strip() for line in rendered.stdout.splitlines()]
    smp = next(line.split()[1] for line in argv if line.startswith("-smp")).split(",")[0]
    assert f"L1 l1: guest hypervisor {smp} vCPU," in summary.stdout
    assert ("when_tcg" in summary.stdout) == ("-accel tcg" in rendered.stdout)
