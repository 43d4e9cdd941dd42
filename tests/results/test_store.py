"""The SQLite results store: round trip, incomplete runs, schema guard, summaries."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.report.table import level_table
from kvmlab.results.model import Failure, Run, Sample
from kvmlab.results.stats import summarize
from kvmlab.results.store import DB_FILE, ResultStore, StoreError


def sample(
    guest: str, level: str, value: float, rep: int, metric: str = "events_per_s", hib: bool = True
) -> Sample:
    return Sample(
        "default",
        guest,
        level,
        "tcg" if level != "L0" else "native",
        "cpu",
        metric,
        value,
        "events/s",
        hib,
        rep,
        "sysbench cpu run",
    )


def new_run() -> Run:
    return Run(0, "lab", "/labs/lab.toml", "abc", "quick", "0.1.0", time.time(), host={"x": 1})


def test_round_trip_and_last(tmp_path: Path) -> None:
    with ResultStore(tmp_path / DB_FILE) as store:
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
    with ResultStore(tmp_path / DB_FILE) as store:
        run = store.start(new_run())
        store.add_host_facts(run, {"accelerator_reason l1/l2": "its hypervisor runs under TCG"})
        assert store.run(run).host == {
            "x": 1,
            "accelerator_reason l1/l2": "its hypervisor runs under TCG",
        }


def test_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    with ResultStore(tmp_path / DB_FILE) as store:
        with pytest.raises(UsageError, match="no runs"):
            store.run("last")
        with pytest.raises(UsageError, match="not a run id"):
            store.run("abc")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    ResultStore(tmp_path / DB_FILE).close()
    db = sqlite3.connect(tmp_path / DB_FILE)
    db.execute("UPDATE meta SET value='99' WHERE key='schema'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema 99"):
        ResultStore(tmp_path / DB_FILE)


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / DB_FILE).write_bytes(b"SQLite format 3\0" + b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable results database"):
        ResultStore(tmp_path / DB_FILE)


@pytest.mark.parametrize("kind", ["text", "empty", "symlink", "relative"])
def test_a_file_that_is_not_a_results_database_is_never_touched(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KVMLAB_RESULTS=/etc/passwd must not chmod, truncate or convert /etc/passwd."""
    victim = tmp_path / "passwd"
    victim.write_text("" if kind == "empty" else "root:x:0:0:root:/root:/bin/bash\n")
    victim.chmod(0o644)
    before = victim.read_bytes()
    target = {"symlink": tmp_path / "link", "relative": Path("passwd")}.get(kind, victim)
    if kind == "symlink":
        target.symlink_to(victim)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KVMLAB_RESULTS", str(target))
    with pytest.raises(UsageError):
        ResultStore()
    assert victim.read_bytes() == before and oct(victim.stat().st_mode & 0o777) == "0o644"


def test_kvmlab_results_names_the_database_file_created_0600(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("KVMLAB_RESULTS", str(db))
    with ResultStore() as store:
        store.start(new_run())
        assert store.path == db
        files = sorted(p.name for p in tmp_path.iterdir())
        assert files == ["r.sqlite", "r.sqlite-shm", "r.sqlite-wal"]
        for file in tmp_path.iterdir():  # the database and its WAL files
            assert file.stat().st_mode & 0o777 == 0o600, file
    assert db.is_file(), "KVMLAB_RESULTS is the file, not a directory"


def test_existing_database_is_made_private(tmp_path: Path) -> None:
    db = tmp_path / DB_FILE
    ResultStore(db).close()
    db.chmod(0o644)
    ResultStore(db).close()
    assert db.stat().st_mode & 0o777 == 0o600


def test_default_database_lives_in_a_private_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KVMLAB_RESULTS", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with ResultStore() as store:
        assert store.path == tmp_path / "data" / "kvmlab" / DB_FILE
    assert (tmp_path / "data" / "kvmlab").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("case", ["directory", "missing parent", "not a regular file"])
def test_bad_kvmlab_results_is_one_usage_error(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = {
        "directory": tmp_path,
        "missing parent": tmp_path / "no" / "r.sqlite",
        "not a regular file": Path("/dev/null"),
    }[case]
    monkeypatch.setenv("KVMLAB_RESULTS", str(path))
    with pytest.raises(UsageError) as info:
        ResultStore()
    message = str(info.value)
    assert message.startswith(f"KVMLAB_RESULTS={path}") and "\n" not in message
    assert {
        "directory": "is a directory",
        "missing parent": "does not exist",
        "not a regular file": "not a regular file",
    }[case] in message
    assert not (tmp_path / "no").exists(), "nothing is created for a bad path"


def test_sample_counts(tmp_path: Path) -> None:
    with ResultStore(tmp_path / DB_FILE) as store:
        first, second = store.start(new_run()), store.start(new_run())
        store.add(first, [sample("host", "L0", 1.0, 0), sample("host", "L0", 2.0, 1)])
        assert store.sample_counts() == {first: 2}
        assert second not in store.sample_counts()


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
    row = (
        "| cpu | events_per_s | events/s (higher is better) | 100 ±0% | "
        "80.0 ±0% (-20.0% [-20.0,-20.0] worse) |"
    )
    assert row in md
    assert "| cpu | latency_ms | events/s (lower is better) | 5.00 | - |" in md
    out = io.StringIO()
    print_table(table, Console(file=out, width=200, color_system=None), "run 1")
    text = out.getvalue()
    assert "80.0 ±0% -20.0% [-20.0,-20.0] worse" in text and "L1 l1 (tcg)" in text


SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    lab TEXT NOT NULL, lab_file TEXT NOT NULL, spec_digest TEXT NOT NULL,
    suite TEXT NOT NULL, kvmlab_version TEXT NOT NULL, host TEXT NOT NULL,
    started REAL NOT NULL, ended REAL, complete INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE samples (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    variant TEXT NOT NULL, guest TEXT NOT NULL, level TEXT NOT NULL, accel TEXT NOT NULL,
    workload TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL, repetition INTEGER NOT NULL, command TEXT NOT NULL
);
INSERT INTO meta VALUES ('schema', '1');
INSERT INTO runs (lab, lab_file, spec_digest, suite, kvmlab_version, host, started)
    VALUES ('old', '/labs/old.toml', 'abc', 'quick', '0.1.0', '{"cpus": 2}', 1700000000.0);
INSERT INTO samples VALUES (1, 'default', 'host', 'L0', 'native', 'cpu', 'events_per_s',
    100.0, 'events/s', 1, 0, 'sysbench cpu run');
"""
"""A database as kvmlab wrote it before failures were stored (schema 1)."""


def failure(level: str = "L2", stage: str = "boot", code: int | None = 3) -> Failure:
    return Failure(
        "default", level, "l1/l2", stage, "l1: starting its guests failed", code, "  exit code: 3"
    )


def test_schema_1_database_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / DB_FILE)
    db.executescript(SCHEMA_1)
    db.close()
    with ResultStore(tmp_path / DB_FILE) as store:
        old = store.run(1)
        assert (old.lab, old.host, old.failures, old.complete) == ("old", {"cpus": 2}, [], False)
        assert [s.value for s in store.samples(1)] == [100.0]
        store.add_failure(1, failure())
        assert store.run(1).failures == [failure()]
        store.add_document(1, "default", "migrations", {"strategies": []})
        assert store.documents(1, "migrations") == [("default", {"strategies": []})]
    schema = (
        sqlite3.connect(tmp_path / DB_FILE)
        .execute("SELECT value FROM meta WHERE key = 'schema'")
        .fetchone()[0]
    )
    assert schema == "3"


def test_documents_are_kept_per_run_kind_and_variant(tmp_path: Path) -> None:
    with ResultStore(tmp_path / DB_FILE) as store:
        first, second = store.start(new_run()), store.start(new_run())
        store.add_document(first, "default", "probe", {"n": 1})
        store.add_document(first, "tuned", "probe", {"n": 2})
        store.add_document(first, "default", "other", {"n": 3})
        assert store.documents(first, "probe") == [("default", {"n": 1}), ("tuned", {"n": 2})]
        assert store.documents(second, "probe") == []


def test_failures_are_kept_per_run_in_order(tmp_path: Path) -> None:
    with ResultStore(tmp_path / DB_FILE) as store:
        first, second = store.start(new_run()), store.start(new_run())
        teardown = failure("L1", "teardown", 3)
        store.add_failure(first, failure())
        store.add_failure(first, teardown)
        store.finish(first, complete=False)
        assert store.run(first).failures == [failure(), teardown]
        assert store.run("last").failures == []
        assert {r.id: r.failures for r in store.runs()} == {
            second: [],
            first: [failure(), teardown],
        }
    with ResultStore(tmp_path / DB_FILE) as store:  # read back as another command would
        assert store.run(first).failures[1].headline == (
            "L1 l1/l2 failed while tearing down: l1: starting its guests failed"
        )


def test_failure_headlines() -> None:
    assert failure().headline == "L2 l1/l2 failed while booting: l1: starting its guests failed"
    interrupted = Failure("tuned", "L1", "l1", "cpu", "Ctrl-C arrived", 130)
    assert interrupted.headline == "tuned: L1 l1 interrupted during cpu: Ctrl-C arrived"
    assert Failure("default", "", "", "", "boom", None).short == "the run failed"
