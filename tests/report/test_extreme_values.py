"""Values at the ends of what a float holds (issue 39, own pass): a metric whose repetitions
span -1e308..1e308 (its range and spread overflow), one of subnormal values, a stdev whose
squares would overflow. Every report is made; the charts' axes and coordinates stay finite
and the page stays well-formed. The installed command runs as a user would."""

from __future__ import annotations

import json
import math
import os
import re
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
