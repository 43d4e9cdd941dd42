"""Values at the ends of what a float holds: a metric whose repetitions
span -1e308..1e308 (its range and spread overflow), one of subnormal values, a stdev whose
squares would overflow. Every report is made; the charts' axes and coordinates stay finite
and the page stays well-formed. The installed command runs as a user would."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvmlab.report.svg import ticks
from kvmlab.results.model import Run, Sample
from kvmlab.results.stats import stdev
from kvmlab.results.store import ResultStore

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
VALUES = {"huge": (1e308, -1e308, 1.7e308), "tiny": (5e-324, 1e-320, 0.0)}


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RESULTS": str(db), "KVMLAB_RUN_DIR": str(db.parent / "run")}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start(Run(0, "lab", "/x", "d", "quick", "0", time.time()))
        store.add(
            run,
            [
                Sample("default", guest, level, "tcg", "cpu", metric, value, "u", True, rep, "c")
                for guest, level in (("host", "L0"), ("vm", "L1"))
                for metric, values in VALUES.items()
                for rep, value in enumerate(values)
            ],
        )
        store.finish(run)
    return path


@pytest.mark.parametrize("output", ["text", "md", "json", "html"])
def test_every_report_is_made(output: str, db: Path) -> None:
    proc = kvmlab(db, "report", "1", "-o", output)
    assert proc.returncode == 0, proc.stderr
    if output == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
    if output == "html":
        page = ET.fromstring(proc.stdout.split("\n", 1)[1])
        numbers = [
            value
            for el in page.iter()
            if el.tag.endswith(("rect", "line", "text"))
            for key, value in el.attrib.items()
            if key in ("x", "y", "x1", "x2", "y1", "y2", "width", "height")
        ]
        assert numbers and all(math.isfinite(float(v)) for v in numbers)
        assert not re.search(r"\b(inf|nan)\b", " ".join(numbers))


def test_axes_stay_finite_at_the_ends_of_floats() -> None:
    for low, high in ((-1e308, 1e308), (0.0, 1.7e308 * 1.08), (0.0, 5e-324), (-5e-324, 0.0)):
        marks = ticks(low, high)
        assert all(math.isfinite(m) for m in marks) and marks[0] <= 0 <= marks[-1]
        assert 2 <= len(marks) <= 12


def test_stdev_of_huge_values_is_finite_and_of_ordinary_ones_exact() -> None:
    assert stdev([1e308, -1e308]) == pytest.approx(math.sqrt(2) * 1e308)
    assert stdev([100.0, 110.0, 105.0]) == 5.0
    assert stdev([3.0]) == 0.0


@pytest.fixture
def infinite(tmp_path: Path) -> Path:
    """Run 1: 30 samples, those at L0 and L1 (20) stored as +inf outside kvmlab (SQLite
    reads ``1e400`` as inf), one at L2 as -inf: what an older kvmlab could have stored."""
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start(Run(0, "lab", "/x", "d", "quick", "0", time.time()))
        store.add(
            run,
            [
                Sample("default", guest, level, "tcg", "cpu", "e", 1.0 + rep, "u", True, rep, "c")
                for guest, level in (("host", "L0"), ("l1", "L1"), ("l1/l2", "L2"))
                for rep in range(10)
            ],
        )
        store.finish(run)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE samples SET value = 1e400 WHERE level IN ('L0', 'L1')")
        conn.execute("UPDATE samples SET value = -1e400 WHERE level = 'L2' AND repetition = 3")
    conn.close()
    return path


LEFT_OUT = "run 1: 21 stored values left out, not finite numbers (inf or -inf)"


def test_values_not_finite_are_counted_where_they_are_left_out(infinite: Path) -> None:
    """Not a silent gap: each report and export says how many values it left out, and
    ``results ls`` counts what reports use, with the rest beside it."""
    text = kvmlab(infinite, "report", "1")
    assert text.returncode == 0, text.stderr
    assert LEFT_OUT in text.stdout.splitlines()
    md = kvmlab(infinite, "report", "1", "-o", "md")
    assert f"Note: {LEFT_OUT}." in md.stdout.splitlines()
    html = kvmlab(infinite, "report", "1", "-o", "html")
    assert f'<p class="note left-out">{LEFT_OUT}.</p>' in html.stdout
    report = json.loads(kvmlab(infinite, "report", "1", "-o", "json").stdout)
    assert [r["not_finite"] for r in report["runs"]] == [21]
    assert {r["level"]: r["n"] for r in report["rows"]} == {"L2": 9}

    csv = kvmlab(infinite, "results", "export", "1")
    assert csv.returncode == 0, csv.stderr
    assert len(csv.stdout.splitlines()) == 1 + 9
    assert csv.stderr == f"note: {LEFT_OUT}\n"
    exported = kvmlab(infinite, "results", "export", "1", "-o", "json")
    doc = json.loads(exported.stdout)
    assert (len(doc["samples"]), doc["not_finite"]) == (9, 21)
    assert exported.stderr == f"note: {LEFT_OUT}\n"

    listed = kvmlab(infinite, "results", "ls")
    assert listed.stdout.split()[-4:] == ["9", "(+21", "not", "finite)"]
    (run,) = json.loads(kvmlab(infinite, "results", "ls", "-o", "json").stdout)["runs"]
    assert (run["samples"], run["not_finite"]) == (9, 21)


def test_a_run_of_nothing_but_inf_says_so(infinite: Path) -> None:
    with sqlite3.connect(infinite) as conn:
        conn.execute("UPDATE samples SET value = -1e400 WHERE level = 'L2'")
    conn.close()
    every = "run 1: 30 stored values left out, not finite numbers (inf or -inf)"
    assert every in kvmlab(infinite, "report", "1").stdout.splitlines()
    exported = kvmlab(infinite, "results", "export", "1")
    assert exported.stdout.splitlines() == [
        "run,variant,guest,level,accel,workload,metric,value,unit,higher_is_better,"
        "repetition,command"
    ]
    assert exported.stderr == f"note: {every}\n"
    assert kvmlab(infinite, "results", "ls").stdout.split()[-4:] == ["0", "(+30", "not", "finite)"]


def test_a_run_without_such_values_has_no_note(db: Path) -> None:
    for args in (("report", "1"), ("report", "1", "-o", "md"), ("results", "export", "1")):
        proc = kvmlab(db, *args)
        assert "not finite" not in proc.stdout + proc.stderr
    report = json.loads(kvmlab(db, "report", "1", "-o", "json").stdout)
    assert report["runs"][0]["not_finite"] == 0
