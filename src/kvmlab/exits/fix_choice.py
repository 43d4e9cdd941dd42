"""Which finding's fix ``kvmlab diagnose --apply`` writes into the lab, or why none."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvmlab.exits.rules import Diagnosis, Finding


def fix_to_apply(diagnosis: Diagnosis, has_lab: bool, why: str) -> tuple[Finding | None, str]:
    """The first finding with a lab-file fix, and "" ; or None and the refusal: no lab to
    write into (``why`` says why), no finding with such a fix, no rule fired."""
    applied = next((f for f in diagnosis.findings if f.fix.lab), None)
    if not has_lab:
        return None, f"nothing to apply: {why}"
    if applied is None:
        if diagnosis.findings:
            return None, "nothing to apply: no finding has a lab-file fix"
        return None, "nothing to apply: no rule fired"
    return applied, ""
