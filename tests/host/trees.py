"""Paths of the recorded host trees and small helpers shared by the host doctor tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kvmlab.host.findings import Finding

FIXTURES = Path(__file__).parent / "fixtures"
INTEL = FIXTURES / "intel-nested-off"
AMD = FIXTURES / "amd-nested-on"
PVM = FIXTURES / "pvm-host"
TREES = (INTEL, AMD, PVM)


def by_id(findings: Sequence[Finding]) -> dict[str, Finding]:
    """Findings keyed by id (and a check that ids are unique)."""
    table = {f.id: f for f in findings}
    assert len(table) == len(findings), "duplicate finding ids"
    return table


def statuses(findings: Sequence[Finding]) -> dict[str, str]:
    """``id -> status`` for compact assertions."""
    return {f.id: f.status.value for f in findings}
