"""Values that are not finite numbers are counted and never stored; whatever an older
kvmlab (or a hand) left stored still reports, in every format, and JSON holds no bare
Infinity. The installed command runs as a user would."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path

import pytest

from kvmlab.results.model import Run
from kvmlab.results.store import ResultStore
from tests.results.results_cli import db, kvmlab, sample

__all__ = ["db"]  # the one-run database fixture


def test_non_finite_values_are_never_stored(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
        store.add(run, [sample("L0", math.inf, 0), sample("L0", math.nan, 1), sample("L0", 5.0, 2)])
        assert [s.value for s in store.samples(run)] == [5.0]
        (failure,) = store.run(run).failures
        assert "2 value(s) that are not finite numbers" in failure.message


def poison(db: Path, value: float) -> None:
    """A stored value as an older kvmlab (or a hand) could leave it."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE samples SET value = ? WHERE rowid = 1", (value,))


@pytest.mark.parametrize("value", [math.inf, -math.inf, 1e308, -1e308])
@pytest.mark.parametrize("output", ["text", "json", "md", "html"])
def test_whatever_is_stored_reports(value: float, output: str, db: Path) -> None:
    poison(db, value)
    proc = kvmlab(db, "report", "1", "-o", output)
    assert proc.returncode == 0, proc.stderr
    if output == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))
