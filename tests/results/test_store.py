"""The SQLite results store: round trip, incomplete runs, schema guard, summaries."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.report.table import level_table
from kvmlab.results.model import Run, Sample
from kvmlab.results.stats import summarize
from kvmlab.results.store import DB_FILE, ResultStore, StoreError


def sample(guest: str, level: str, value: float, rep: int, metric: str = "events_per_s",
           hib: bool = True) -> Sample:  # fmt: skip
    return Sample("default", guest, level, "tcg" if level != "L0" else "native", "cpu", metric,
                  value, "events/s", hib, rep, "sysbench cpu run")  # fmt: skip


def new_run() -> Run:
    return Run(0, "lab", "/labs/lab.toml", "abc", "quick", "0.1.0", time.time(), host={"x": 1})


def test_round_trip_and_last(tmp_path: Path) -> None:
    with ResultStore(tmp_path) as store:
        first = store.start(new_run())
        store.add(first, [sample("host", "L0", 100.0, 0), sample("host", "L0", 110.0, 1)])
        store.finish(first)
        second = store.start(new_run())
        assert store.run("last").id == second
        assert store.run(str(first)).complete
        assert not store.run(second).complete, "a run never finished stays incomplete"
        back = store.samples(first)
        assert [s.value for s in back] == [100.0, 110.0]
        assert back[0] == sample("host", "L0", 100.0, 0)
        assert store.run(first).host == {"x": 1}
    mode = sqlite3.connect(tmp_path / DB_FILE).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_host_facts_learnt_during_a_run_are_added(tmp_path: Path) -> None:
    with ResultStore(tmp_path) as store:
        run = store.start(new_run())
        store.add_host_facts(run, {"accelerator_reason l1/l2": "its hypervisor runs under TCG"})
        assert store.run(run).host == {"x": 1,
                                       "accelerator_reason l1/l2": "its hypervisor runs under TCG"}


def test_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    with ResultStore(tmp_path) as store:
        with pytest.raises(UsageError, match="no runs"):
            store.run("last")
        with pytest.raises(UsageError, match="not a run id"):
            store.run("abc")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    ResultStore(tmp_path).close()
    db = sqlite3.connect(tmp_path / DB_FILE)
    db.execute("UPDATE meta SET value='99' WHERE key='schema'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema 99"):
        ResultStore(tmp_path)


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / DB_FILE).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable results database"):
        ResultStore(tmp_path)


def test_level_table_changes_against_level_below() -> None:
    samples = [
        *(sample("host", "L0", v, i) for i, v in enumerate([100.0, 102.0, 98.0])),
        *(sample("l1", "L1", v, i) for i, v in enumerate([80.0, 81.0, 79.0])),
        *(sample("l1/l2", "L2", v, i) for i, v in enumerate([60.0, 62.0, 58.0])),
        *(sample("l1", "L1", v, i, "latency_ms", False) for i, v in enumerate([2.0, 2.0, 2.0])),
        *(sample("host", "L0", v, i, "latency_ms", False) for i, v in enumerate([1.0, 1, 1])),
    ]
    table = level_table(summarize(samples))
    assert [c.guest for c in table.columns] == ["host", "l1", "l1/l2"]
    events, latency = table.rows
    cells = [events.cells[c] for c in table.columns]
    assert [c.summary.median for c in cells] == [100.0, 80.0, 60.0]
    assert cells[0].change_pct is None
    assert cells[1].change_pct == pytest.approx(-20.0)
    assert cells[2].change_pct == pytest.approx(-25.0), "L2 is compared with its L1"
    assert cells[1].worse and cells[2].worse
    assert cells[0].summary.spread_pct == pytest.approx(4.0)
    lat = [latency.cells.get(c) for c in table.columns]
    assert lat[2] is None
    assert lat[1] is not None and lat[1].change_pct == pytest.approx(100.0) and lat[1].worse


def test_markdown_and_text_show_medians_and_changes() -> None:
    import io

    from rich.console import Console

    from kvmlab.report.markdown import markdown_table
    from kvmlab.report.text import print_table

    samples = [
        *(sample("host", "L0", v, i) for i, v in enumerate([100.0, 100.0])),
        *(sample("l1", "L1", v, i) for i, v in enumerate([80.0, 80.0])),
        sample("host", "L0", 5.0, 0, "latency_ms", False),
    ]
    table = level_table(summarize(samples))
    md = markdown_table(table, "run 1")
    row = "| cpu | events_per_s | events/s (higher is better) | 100 ±0% | 80.0 ±0% (-20.0%) |"
    assert row in md
    assert "| cpu | latency_ms | events/s (lower is better) | 5.00 | - |" in md
    out = io.StringIO()
    print_table(table, Console(file=out, width=200, color_system=None), "run 1")
    text = out.getvalue()
    assert "80.0 ±0% -20.0%" in text and "L1 l1 (tcg)" in text
