"""JSON schema stability, exit status and the rich table."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from kvmlab.host.accel import choose_accel
from kvmlab.host.doctor import run_checks
from kvmlab.host.findings import Evidence, Finding, Status
from kvmlab.host.output import exit_status, findings_to_json, print_findings

from .trees import AMD, INTEL, PVM, TREES

DOC = Path(__file__).parents[2] / "docs" / "doctor-json.md"


@pytest.mark.parametrize("tree", TREES, ids=lambda p: p.name)
def test_json_schema_keys(tree: Path) -> None:
    doc = json.loads(findings_to_json(run_checks(tree), choose_accel(tree)))
    assert list(doc) == ["schema", "kvmlab", "exit_status", "counts", "accel", "findings"]
    assert doc["schema"] == "kvmlab.doctor/1"
    assert list(doc["counts"]) == ["ok", "warn", "fail", "info", "skip"]
    assert list(doc["accel"]) == ["accel", "flavour", "reason"]
    assert sum(doc["counts"].values()) == len(doc["findings"])
    for f in doc["findings"]:
        assert list(f) == ["id", "status", "summary", "evidence", "fix"]
        assert f["status"] in {s.value for s in Status}
        assert all(list(e) == ["source", "value"] for e in f["evidence"])
        assert all(isinstance(line, str) for line in f["fix"])


def test_json_values_for_intel() -> None:
    doc = json.loads(findings_to_json(run_checks(INTEL), choose_accel(INTEL)))
    assert doc["exit_status"] == 0
    assert doc["accel"]["accel"] == "kvm"
    nested = next(f for f in doc["findings"] if f["id"] == "kvm.nested")
    assert nested["status"] == "warn"
    assert nested["evidence"] == [
        {"source": "/sys/module/kvm_intel/parameters/nested", "value": "N"}
    ]
    assert "options kvm-intel nested=1" in nested["fix"][1]


def test_json_is_deterministic() -> None:
    first = findings_to_json(run_checks(AMD), choose_accel(AMD))
    assert first == findings_to_json(run_checks(AMD), choose_accel(AMD))


def test_doc_describes_every_key() -> None:
    text = DOC.read_text()
    for key in (
        "schema",
        "exit_status",
        "counts",
        "accel",
        "flavour",
        "reason",
        "findings",
        "id",
        "status",
        "summary",
        "evidence",
        "source",
        "value",
        "fix",
    ):
        assert re.search(rf"`(accel\.)?{key}`", text), key


def test_exit_status() -> None:
    ok = Finding("a", Status.OK, "fine")
    assert exit_status([]) == 0
    assert exit_status([ok, Finding("b", Status.WARN, "hm"), Finding("c", Status.SKIP, "-")]) == 0
    assert exit_status([ok, Finding("d", Status.FAIL, "broken", (Evidence("/x", "y"),))]) == 1


def test_print_findings_shows_status_summary_evidence_and_fix() -> None:
    console = Console(file=io.StringIO(), record=True, width=200, color_system=None)
    print_findings(run_checks(INTEL), choose_accel(INTEL), console)
    text = console.export_text()
    assert re.search(r"WARN\s+kvm\.nested\s+nested virtualization off", text)
    assert "/sys/module/kvm_intel/parameters/nested: N" in text
    assert "fix: echo 'options kvm-intel nested=1' >> /etc/modprobe.d/kvm.conf" in text
    assert "accelerator: KVM (kvm_intel)" in text
    assert "0 fail" in text


def test_print_findings_colours_statuses() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system="standard")
    print_findings(run_checks(PVM), choose_accel(PVM), console)
    text = out.getvalue()
    assert "\x1b[1;33mWARN" in text  # yellow
    assert "\x1b[1;32mOK" in text  # green
    assert "TCG" in text


@pytest.mark.parametrize("terminal", [False, True])
def test_print_findings_never_breaks_a_fix_or_path(terminal: bool) -> None:
    out = io.StringIO()
    console = Console(file=out, width=50, force_terminal=terminal, color_system=None)
    findings = run_checks(INTEL)
    print_findings(findings, choose_accel(INTEL), console)
    lines = [line.strip() for line in out.getvalue().splitlines()]
    fixes = [fix for f in findings for fix in f.fix]
    assert max(map(len, fixes)) > 50
    for fix in fixes:
        assert f"fix: {fix}" in lines
    for f in findings:
        for e in f.evidence:
            assert f"{e.source}: {e.value}".strip() in lines
    if not terminal:
        assert not [x for x in out.getvalue().splitlines() if x != x.rstrip()]
        assert re.search(r"^WARN  kvm\.nested\s+nested virtualization off", out.getvalue(), re.M)
