"""``kvmlab report NEW --compare BASE`` as a CI job runs it: each metric's verdict after the
table, ``-o junit`` that a JUnit reader parses, and ``--fail-on-regression PCT`` exiting 6
exactly when a metric is significantly worse by more than PCT (a slowdown injected into
the stored samples from outside kvmlab's code: the second run written 30 % slower)."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from kvmlab.results.model import Run
from kvmlab.results.store import ResultStore
from tests.readme import readme_line
from tests.results.results_cli import kvmlab, sample

BASE = (100.0, 102.0, 98.0, 101.0, 99.0)


def _runs(path: Path, factor: float) -> None:
    """Run 1 at BASE, run 2 at BASE x ``factor`` (L0 and L1, five repetitions)."""
    with ResultStore(path) as store:
        for scale in (1.0, factor):
            run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
            store.add(
                run,
                [sample(level, v * scale, i) for level in ("L0", "L1") for i, v in enumerate(BASE)],
            )
            store.finish(run, True)


def test_a_slower_run_fails_the_gate_and_junit_names_it(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    _runs(db, 0.7)
    text = kvmlab(db, "report", "2", "--compare", "1")
    assert text.returncode == 0, text.stderr
    assert "-30.0% [" in text.stdout and "worse" in text.stdout
    assert "2 metrics compared: 2 worse" in text.stdout
    # the README's gate, with this database's base run in place of its example's
    readme = readme_line("kvmlab report last --compare")
    gated = kvmlab(db, *[("1" if a == "12" else a) for a in readme])
    assert gated.returncode == 6, gated.stderr
    assert "significantly worse than run 1 by more than 5%" in gated.stderr
    assert "REGRESSION: 2 metric(s)" in gated.stdout  # the report is out before the exit
    wide = kvmlab(db, "report", "2", "--compare", "1", "--fail-on-regression", "40")
    assert wide.returncode == 0, wide.stderr  # 30 % worse is within a 40 % gate
    junit = kvmlab(
        db, "report", "last", "--compare", "1", "-o", "junit", "--fail-on-regression", "10"
    )
    assert junit.returncode == 6
    suite = ET.fromstring(junit.stdout.split("\n", 1)[1]).find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "2"
    doc = json.loads(kvmlab(db, "report", "2", "--compare", "1", "-o", "json").stdout)
    assert doc["schema"] == "kvmlab.report/1"
    assert {r["verdict"] for r in doc["comparison"]["metrics"]} == {"worse"}


def test_the_same_numbers_pass_any_gate(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    _runs(db, 1.0)
    same = kvmlab(db, "report", "2", "--compare", "1", "--fail-on-regression", "0")
    assert same.returncode == 0, same.stderr
    assert "no metric significantly worse by more than 0%" in same.stdout


def test_the_gate_needs_a_base_and_junit_a_comparison(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    _runs(db, 1.0)
    alone = kvmlab(db, "report", "2", "--fail-on-regression", "5")
    assert alone.returncode == 2 and "add --compare BASE" in alone.stderr
    junit = kvmlab(db, "report", "2", "-o", "junit")
    assert junit.returncode == 2 and "junit" in junit.stderr
    bad = kvmlab(db, "report", "2", "--compare", "1", "--fail-on-regression", "-3")
    assert bad.returncode == 2 and "from 0 to 1000" in bad.stderr
