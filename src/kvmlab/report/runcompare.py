"""One stored run against another: every metric both measured, its change with an interval
and a verdict (:mod:`kvmlab.results.verdict`), the gate a CI job sets on regressions, and
the comparison as text, JSON rows and JUnit XML.

A metric is matched by where and what it measured: variant, guest, workload, metric. A
metric only one run has is listed as such, never compared with something else.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvmlab.report.fmt import WORDS, interval_text, number, shown
from kvmlab.results.model import Summary
from kvmlab.results.verdict import METHOD, Change, Verdict, compare, noise_for, thresholds_text

Key = tuple[str, str, str, str]
"""(variant, guest, workload, metric)."""


def key_of(s: Summary) -> Key:
    return (s.variant, s.guest, s.workload, s.metric)


@dataclass(frozen=True)
class MetricChange:
    """One metric in both runs, and the change from the base run to the new one."""

    base: Summary
    new: Summary
    change: Change | None
    """None when no ratio exists (the base's median is 0)."""

    @property
    def name(self) -> str:
        """``nested/l1 cpu 1thread_events_per_s`` (the variant first when not the lab)."""
        s = self.new
        where = s.guest if s.variant in ("", "default") else f"{s.variant}:{s.guest}"
        return f"{where} {s.workload} {s.metric}"

    def worse_by(self) -> float | None:
        """How far worse the new run is, in percent of the base (positive: worse), when the
        verdict calls it worse; None otherwise."""
        if self.change is None or self.change.verdict is not Verdict.WORSE:
            return None
        pct = self.change.pct
        return -pct if self.new.higher_is_better else pct


@dataclass
class RunComparison:
    """Run ``base_id`` against run ``new_id``, metric by metric."""

    base_id: int
    new_id: int
    changes: list[MetricChange] = field(default_factory=list)
    only_base: list[Key] = field(default_factory=list)
    only_new: list[Key] = field(default_factory=list)
    noise: float | None = None
    """One noise threshold for every metric; None: each workload's own."""

    def regressions(self, pct: float) -> list[MetricChange]:
        """The metrics significantly worse (the verdict says so) by more than ``pct``
        percent of the base, median against median: what ``--fail-on-regression`` fails."""
        out = []
        for c in self.changes:
            worse = c.worse_by()
            if worse is not None and worse > pct:
                out.append(c)
        return out

    def counts(self) -> dict[str, int]:
        """How many metrics got each verdict (``no ratio`` for a zero base)."""
        tally: dict[str, int] = {}
        for c in self.changes:
            word = "no ratio" if c.change is None else c.change.verdict.value
            tally[word] = tally.get(word, 0) + 1
        return tally


def compare_runs(
    base_id: int,
    base: Sequence[Summary],
    new_id: int,
    new: Sequence[Summary],
    noise: float | None = None,
) -> RunComparison:
    """Every metric of ``new`` against the same metric of ``base``."""
    before = {key_of(s): s for s in base}
    after = {key_of(s): s for s in new}
    result = RunComparison(base_id, new_id, noise=noise)
    for key, s in after.items():
        b = before.get(key)
        if b is None:
            result.only_new.append(key)
            continue
        result.changes.append(
            MetricChange(
                b,
                s,
                compare(
                    b.values,
                    s.values,
                    s.higher_is_better,
                    noise_for(s.workload, s.metric) if noise is None else noise,
                ),
            )
        )
    result.only_base = [k for k in before if k not in after]
    return result


def change_text(change: Change | None) -> str:
    """``-23.4% [-31,-15] worse``; ``no ratio`` for a zero base."""
    if change is None:
        return "no ratio (base median 0)"
    text = f"{change.pct:+.1f}%"
    interval = change.interval_pct()
    if interval is not None:
        text += f" {interval_text(*interval)}"
    return f"{text} {WORDS[change.verdict]}"


def legend(noise: float | None) -> str:
    within = (
        f"±{noise:.0%}" if noise is not None else f"the workload's threshold ({thresholds_text()})"
    )
    return (
        f"run B against run A: median against median, [95% interval], and the verdict: better "
        f"or worse, n.s. = no significant change, noise = within {within}, 1 run = no "
        f"interval ({METHOD})"
    )


def text_report(comparison: RunComparison, fail_pct: float | None = None) -> str:
    """The comparison as an aligned table: one metric a line, then what only one run has,
    the verdicts counted and, with a gate, what fails it."""
    a, b = comparison.base_id, comparison.new_id
    head = ("metric", "unit", f"run {a}", f"run {b}", "change")
    rows = [head]
    for c in comparison.changes:
        rows.append(
            (
                shown(c.name),
                shown(c.new.unit) + (" ↑" if c.new.higher_is_better else " ↓"),
                f"{number(c.base.median)} n={c.base.n}",
                f"{number(c.new.median)} n={c.new.n}",
                change_text(c.change),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    ]
    for label, keys in (
        (f"only in run {a}", comparison.only_base),
        (f"only in run {b}", comparison.only_new),
    ):
        if keys:
            names = ", ".join(shown(" ".join(k[1:])) for k in keys[:8])
            more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
            lines.append(f"{label}: {names}{more}")
    counted = ", ".join(f"{n} {word}" for word, n in sorted(comparison.counts().items()))
    lines.append(f"{len(comparison.changes)} metrics compared: {counted or 'none'}")
    lines.append(legend(comparison.noise))
    if fail_pct is not None:
        bad = comparison.regressions(fail_pct)
        if bad:
            lines.append(
                f"REGRESSION: {len(bad)} metric(s) significantly worse by more than {fail_pct:g}%:"
            )
            lines += [f"  {shown(c.name)}: {change_text(c.change)}" for c in bad]
        else:
            lines.append(f"no metric significantly worse by more than {fail_pct:g}%")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def json_rows(comparison: RunComparison, fail_pct: float | None = None) -> dict[str, Any]:
    """The comparison as the JSON document's data (inside kvmlab's envelope)."""
    failing = {id(c) for c in comparison.regressions(fail_pct)} if fail_pct is not None else set()
    rows = []
    for c in comparison.changes:
        interval = c.change.interval_pct() if c.change else None
        rows.append(
            {
                "variant": c.new.variant,
                "guest": c.new.guest,
                "level": c.new.level,
                "workload": c.new.workload,
                "metric": c.new.metric,
                "unit": c.new.unit,
                "higher_is_better": c.new.higher_is_better,
                "base": {
                    "median": _num(c.base.median),
                    "n": c.base.n,
                    "values": list(c.base.values),
                },
                "new": {"median": _num(c.new.median), "n": c.new.n, "values": list(c.new.values)},
                "change_pct": None if c.change is None else _num(c.change.pct),
                "change_low_pct": None if interval is None else _num(interval[0]),
                "change_high_pct": None if interval is None else _num(interval[1]),
                "verdict": None if c.change is None else c.change.verdict.value,
                "noise_pct": None if c.change is None else _num(100 * c.change.noise),
                "regression": id(c) in failing,
            }
        )
    return {
        "base_run": comparison.base_id,
        "new_run": comparison.new_id,
        "noise_pct": None if comparison.noise is None else 100 * comparison.noise,
        "fail_on_regression_pct": fail_pct,
        "method": METHOD,
        "metrics": rows,
        "only_in_base": [list(k) for k in comparison.only_base],
        "only_in_new": [list(k) for k in comparison.only_new],
        "regressions": sum(1 for r in rows if r["regression"]),
    }


def junit_xml(comparison: RunComparison, fail_pct: float | None = None) -> str:
    """JUnit XML: one test case per metric, failed when it regresses past ``fail_pct``
    (without a gate, when its verdict is worse); the change, interval and verdict in the
    message. CI systems (GitLab, Jenkins, GitHub's test reporters) display it."""
    pct = 0.0 if fail_pct is None else fail_pct
    failing = {id(c) for c in comparison.regressions(pct)}
    name = f"kvmlab run {comparison.new_id} against run {comparison.base_id}"
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(comparison.changes)),
        failures=str(len(failing)),
        errors="0",
        skipped="0",
    )
    for c in comparison.changes:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=shown(f"kvmlab.{c.new.variant}.{c.new.workload}"),
            name=shown(f"{c.new.guest} {c.new.metric} ({c.new.unit})"),
        )
        message = shown(
            f"{change_text(c.change)}: {number(c.base.median)} -> {number(c.new.median)} "
            f"{c.new.unit} (n={c.base.n}, n={c.new.n})"
        )
        if id(c) in failing:
            limit = f"more than {pct:g}%" if fail_pct is not None else "significantly"
            failure = ET.SubElement(case, "failure", message=f"worse by {limit}: {message}")
            failure.text = message
        else:
            out = ET.SubElement(case, "system-out")
            out.text = message
    suites = ET.Element("testsuites", name=name)
    suites.append(suite)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
