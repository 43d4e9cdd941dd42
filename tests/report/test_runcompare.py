"""One stored run against another: verdicts per metric, the regression gate, JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace

from kvmlab.report.runcompare import compare_runs, json_rows, junit_xml, text_report
from kvmlab.results.model import Summary
from tests.report.data import PLACES, summaries, summary


def _slowed(rows: list[Summary], factor: float, workload: str = "cpu") -> list[Summary]:
    """``rows`` with ``workload``'s metrics made worse by ``factor`` (0.5: half as good)."""
    out = []
    for s in rows:
        if s.workload != workload:
            out.append(s)
            continue
        f = factor if s.higher_is_better else 1 / factor
        out.append(
            replace(
                s,
                median=s.median * f,
                minimum=s.minimum * f,
                maximum=s.maximum * f,
                values=tuple(v * f for v in s.values),
            )
        )
    return out


def test_a_run_against_its_twin_calls_nothing_and_passes_any_gate() -> None:
    same = compare_runs(1, summaries(), 2, summaries())
    assert len(same.changes) == 12 and not same.only_base and not same.only_new
    assert {c.change.verdict.value for c in same.changes if c.change} == {"no significant change"}
    assert same.regressions(0.0) == []
    assert "no metric significantly worse by more than 5%" in text_report(same, 5.0)


def test_a_halved_cpu_is_worse_and_fails_the_gate_but_not_a_wider_one() -> None:
    comparison = compare_runs(1, summaries(), 2, _slowed(summaries(), 0.5))
    bad = comparison.regressions(10.0)
    assert {(c.new.workload, c.new.guest) for c in bad} == {
        ("cpu", g) for g, _, _ in PLACES
    } and len(bad) == 6  # events and latency at three levels
    assert all(c.change and c.change.verdict.value == "worse" for c in bad)
    # events/s halved is 50% worse, latency doubled 100% worse
    assert {c.new.metric for c in comparison.regressions(60.0)} == {"latency"}
    assert comparison.regressions(120.0) == []
    text = text_report(comparison, 10.0)
    assert "REGRESSION: 6 metric(s) significantly worse by more than 10%" in text
    assert "-50.0% [" in text and "worse" in text


def test_a_gain_is_never_a_regression() -> None:
    comparison = compare_runs(1, summaries(), 2, _slowed(summaries(), 2.0))
    assert comparison.regressions(0.0) == []
    assert {
        c.change.verdict.value for c in comparison.changes if c.change and c.new.workload == "cpu"
    } == {"better"}


def test_noisy_samples_are_not_called_even_when_the_median_moved() -> None:
    place = PLACES[1]
    base = [summary("default", place, "disk", "randread", "IOPS", True, 100.0, n=3, spread=0.9)]
    new = [summary("default", place, "disk", "randread", "IOPS", True, 80.0, n=3, spread=0.9)]
    comparison = compare_runs(1, base, 2, new)
    assert comparison.changes[0].change is not None
    assert comparison.changes[0].change.verdict.value == "no significant change"
    assert comparison.regressions(5.0) == []


def test_metrics_only_one_run_has_are_listed_not_compared() -> None:
    base = summaries()
    new = [s for s in summaries() if s.workload == "cpu"] + [
        summary("default", PLACES[0], "net", "tcp", "Gbit/s", True, 9.0)
    ]
    comparison = compare_runs(3, base, 4, new)
    assert len(comparison.changes) == 6
    assert ("default", "host", "net", "tcp") in comparison.only_new
    assert len(comparison.only_base) == 6
    text = text_report(comparison)
    assert "only in run 3: " in text and "only in run 4: host net tcp" in text


def test_json_rows_carry_interval_verdict_and_gate() -> None:
    comparison = compare_runs(1, summaries(), 2, _slowed(summaries(), 0.5))
    doc = json_rows(comparison, 10.0)
    json.dumps(doc, allow_nan=False)
    row = next(r for r in doc["metrics"] if r["metric"] == "events" and r["guest"] == "host")
    assert row["verdict"] == "worse" and row["regression"] is True
    assert row["change_low_pct"] < row["change_pct"] < row["change_high_pct"] < 0
    assert doc["regressions"] == 6 and doc["fail_on_regression_pct"] == 10.0


def test_junit_has_a_case_per_metric_and_a_failure_per_regression() -> None:
    comparison = compare_runs(1, summaries(), 2, _slowed(summaries(), 0.5))
    root = ET.fromstring(junit_xml(comparison, 10.0).split("\n", 1)[1])
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "12" and suite.get("failures") == "6"
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert len(failed) == 6
    message = failed[0].find("failure").get("message")  # type: ignore[union-attr]
    assert message is not None and "worse by more than 10%" in message and "[" in message


def test_junit_escapes_names_from_the_database() -> None:
    place = ("l1\x1b[31m<x>", "L1", "tcg")
    rows = [summary("default", place, "cpu", 'ev"&', "events/s", True, 100.0)]
    text = junit_xml(compare_runs(1, rows, 2, rows))
    assert "\x1b" not in text
    root = ET.fromstring(text.split("\n", 1)[1])
    case = next(root.iter("testcase"))
    assert case.get("name", "").startswith('l1\\x1b[31m<x> ev"&')
