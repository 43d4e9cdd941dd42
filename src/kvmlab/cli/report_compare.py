"""``kvmlab report NEW --compare BASE``: every metric of one run against another, with its
verdict; ``-o junit`` for CI, and ``--fail-on-regression PCT``, the gate."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kvmlab.errors import Regression, printable

if TYPE_CHECKING:
    from kvmlab.report.runcompare import RunComparison
    from kvmlab.results.model import Run
    from kvmlab.results.store import ResultStore


def comparison(store: ResultStore, new: Run, base: Run) -> RunComparison:
    """Run ``new`` against run ``base``, metric by metric."""
    import sys

    from kvmlab.report.runcompare import compare_runs
    from kvmlab.results.stats import summarize

    if new.lab != base.lab:
        print(
            f"kvmlab: note: run {new.id} is of lab {printable(new.lab)} and run {base.id} of "
            f"lab {printable(base.lab)}: only the metrics both measured, at the same places, "
            "are compared",
            file=sys.stderr,
        )
    return compare_runs(
        base.id,
        summarize(store.iter_samples(base.id)),
        new.id,
        summarize(store.iter_samples(new.id)),
    )


def rendered(result: RunComparison, output: str, fail_pct: float | None) -> str:
    """The comparison as ``text``, ``junit`` or the JSON ``comparison`` object."""
    from kvmlab.report.runcompare import json_rows, junit_xml, text_report

    if output == "junit":
        return junit_xml(result, fail_pct)
    if output == "json":
        return json.dumps(json_rows(result, fail_pct), indent=2)
    return "\n" + text_report(result, fail_pct)


def with_comparison(report: str, result: RunComparison, fail_pct: float | None) -> str:
    """The JSON report of both runs with the comparison in it (``comparison``)."""
    from kvmlab.report.runcompare import json_rows

    doc: dict[str, Any] = json.loads(report)
    doc["comparison"] = json_rows(result, fail_pct)
    return json.dumps(doc, indent=2) + "\n"


def gate(result: RunComparison, fail_pct: float | None) -> None:
    """Exit 6 (:class:`Regression`) when a metric is significantly worse past the gate."""
    if fail_pct is None:
        return
    bad = result.regressions(fail_pct)
    if bad:
        names = ", ".join(printable(c.name) for c in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise Regression(
            f"run {result.new_id} is significantly worse than run {result.base_id} by more "
            f"than {fail_pct:g}% on {len(bad)} metric(s): {names}{more} (the table above has "
            "each change and its interval)"
        )
