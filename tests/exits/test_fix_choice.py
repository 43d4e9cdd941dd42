"""Which finding ``kvmlab diagnose --apply`` writes, or why none (kvmlab.exits.fix_choice)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from kvmlab.exits.fix_choice import fix_to_apply
from kvmlab.exits.rules import Diagnosis, Finding


def finding(lab: dict[str, object]) -> Finding:
    return cast(Finding, SimpleNamespace(fix=SimpleNamespace(lab=lab)))


def test_the_first_finding_with_a_lab_fix_is_applied() -> None:
    host_only, first, second = finding({}), finding({"a": 1}), finding({"b": 2})
    diagnosis = Diagnosis([host_only, first, second], [])
    assert fix_to_apply(diagnosis, True, "") == (first, "")


def test_without_a_lab_the_reason_is_said() -> None:
    diagnosis = Diagnosis([finding({"a": 1})], [])
    applied, refusal = fix_to_apply(diagnosis, False, "the lab file is not readable")
    assert applied is None
    assert refusal == "nothing to apply: the lab file is not readable"


def test_no_lab_fix_and_no_finding_are_told_apart() -> None:
    assert fix_to_apply(Diagnosis([finding({})], []), True, "") == (
        None,
        "nothing to apply: no finding has a lab-file fix",
    )
    assert fix_to_apply(Diagnosis([], []), True, "") == (None, "nothing to apply: no rule fired")
