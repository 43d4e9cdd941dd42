"""A results database changed outside kvmlab (by hand, by another tool, by a damaged disk):
every row is checked like user input, a bad one is named in one line (file, run, row,
field, how to fix it) and left out, and the others are still shown.
The installed command runs as a user would; nothing boots."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.results.model import Failure, Run, Sample
from kvmlab.results.store import MAX_PROBLEMS, ResultStore, StoreError

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
FIX = "it was changed outside kvmlab: correct the row or delete it"


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "COLUMNS": "200",
        "KVMLAB_RESULTS": str(db),
        "KVMLAB_RUN_DIR": str(db.parent / "run"),
    }
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def sample(level: str, value: float, rep: int, metric: str = "events") -> Sample:
    guest, accel = ("host", "native") if level == "L0" else ("vm", "tcg")
    return Sample(
        "default", guest, level, accel, "cpu", metric, value, "events/s", True, rep, "sysbench"
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Runs 1, 2 and 3 (labs one, two, three), each with six samples; run 1 with a failure."""
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        for lab in ("one", "two", "three"):
            run = store.start(Run(0, lab, f"/labs/{lab}.toml", "d", "quick", "0", time.time()))
            store.add(
                run,
                [
                    sample(lv, v, i)
                    for lv in ("L0", "L1")
                    for i, v in enumerate((100.0, 110.0, 105.0))
                ],
            )
            if lab == "one":
                store.add_failure(run, Failure("default", "L1", "vm", "cpu", "boom", 3))
            store.finish(run)
    return path


def tamper(db: Path, *sql: str) -> None:
    with sqlite3.connect(db) as conn:
        for statement in sql:
            conn.execute(statement)
    conn.close()


def bad_line(db: Path, what: str, why: str, delete: str) -> str:
    return f"kvmlab: {db}: {what}: {why}; {FIX} ({delete})"


RUN_CASES = {
    "host not JSON": (
        "UPDATE runs SET host = 'x' WHERE id = 2",
        "host is not JSON (Expecting value: line 1 column 1 (char 0))",
    ),
    "host not an object": (
        "UPDATE runs SET host = 'null' WHERE id = 2",
        "host is null, not a JSON object",
    ),
    "host with NaN": (
        """UPDATE runs SET host = '{"cpus": NaN}' WHERE id = 2""",
        "host holds NaN, which is not a number",
    ),
    "host nested deep": (
        f"UPDATE runs SET host = '{'[' * 100000}' WHERE id = 2",
        "host is nested more than 64 deep",
    ),
    "started text": (
        "UPDATE runs SET started = 'yesterday' WHERE id = 2",
        "started is 'yesterday', not a time in seconds",
    ),
    "started huge": (
        "UPDATE runs SET started = 1e308 WHERE id = 2",
        "started is 1e+308, not a time between 1970 and 9999",
    ),
    "ended negative": (
        "UPDATE runs SET ended = -5 WHERE id = 2",
        "ended is -5.0, not a time between 1970 and 9999",
    ),
    "complete 7": ("UPDATE runs SET complete = 7 WHERE id = 2", "complete is 7, not 0 or 1"),
    "lab a blob": (
        "UPDATE runs SET lab = X'00ff' WHERE id = 2",
        "lab is a blob of 2 bytes, not text",
    ),
    "lab too long": (
        f"UPDATE runs SET lab = '{'x' * 5000}' WHERE id = 2",
        "lab is longer than 4096 characters",
    ),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_an_unreadable_run_is_named_and_the_others_listed(case: str, db: Path) -> None:
    sql, why = RUN_CASES[case]
    tamper(db, sql)
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == [bad_line(db, "run 2", why, "DELETE FROM runs WHERE id = 2")]
    listed = [line.split()[:2] for line in proc.stdout.splitlines()[2:]]
    assert listed == [["3", "three"], ["1", "one"]]
    for args in (("report", "2"), ("report", "2", "-o", "json")):
        proc = kvmlab(db, *args)
        assert proc.returncode == 3, args
        assert proc.stderr.splitlines() == [
            bad_line(db, "run 2", why, "DELETE FROM runs WHERE id = 2")
        ]
    assert kvmlab(db, "report", "3").returncode == 0, "another run reports as ever"


DOCUMENT_CASES = {
    "not JSON": ("{x", "body is not JSON (Expecting property name enclosed in double quotes"),
    "nested deep": ("[" * 100000, "body is nested more than 64 deep"),
    "null": ("null", "body is null, not a JSON object"),
    "strategies a number": ('{"strategies": 5}', "body: strategies is a number, not an array"),
    "strategy without a mode": (
        '{"strategies": [{"name": "p", "spec": {}}]}',
        "body: strategies[0].spec.mode is null, not a string",
    ),
    "number too large": ('{"strategies": [], "x": 1e999}', "body holds '1e999', too large"),
}


@pytest.mark.parametrize("case", sorted(DOCUMENT_CASES))
@pytest.mark.parametrize("output", ["text", "html", "json"])
def test_an_unreadable_document_is_named_and_the_report_still_made(
    case: str, output: str, db: Path
) -> None:
    body, why = DOCUMENT_CASES[case]
    tamper(db, f"INSERT INTO documents VALUES (1, 'default', 'migrations', {sqlite_text(body)})")
    proc = kvmlab(db, "report", "1", "-o", output)
    assert proc.returncode == 3, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"kvmlab: {db}: run 1, document row 1 (migrations): {why}"), line
    assert line.endswith(f"; {FIX} (DELETE FROM documents WHERE rowid = 1)")
    assert "events" in proc.stdout, "the report is made of what could be read"


def sqlite_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


SAMPLE_CASES = {
    "value text": ("value = 'abc'", "value is 'abc', not a number"),
    "value null": ("value = NULL", "value is None, not a number"),
    "level unknown": ("level = 'banana'", "level is 'banana', not L0, L1, L2, ..."),
    "repetition text": ("repetition = 'x'", "repetition is 'x', not a whole number"),
    "repetition negative": ("repetition = -1", "repetition is -1, not in 0..2147483647"),
    "higher_is_better 2": ("higher_is_better = 2", "higher_is_better is 2, not 0 or 1"),
    "metric a number": ("metric = 5", "metric is 5, not text"),
}


@pytest.fixture
def loose(db: Path) -> Path:
    """The samples table without its column types and constraints (as a hand-made one)."""
    tamper(
        db,
        "ALTER TABLE samples RENAME TO typed",
        "CREATE TABLE samples (run, variant, guest, level, accel, workload, metric, value, "
        "unit, higher_is_better, repetition, command)",
        "INSERT INTO samples SELECT * FROM typed ORDER BY rowid",
        "DROP TABLE typed",
    )
    return db


@pytest.mark.parametrize("case", sorted(SAMPLE_CASES))
def test_an_unreadable_sample_is_named_and_the_others_reported(case: str, loose: Path) -> None:
    change, why = SAMPLE_CASES[case]
    tamper(loose, f"UPDATE samples SET {change} WHERE rowid = 1")
    proc = kvmlab(loose, "report", "1")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == [
        bad_line(loose, "run 1, sample row 1", why, "DELETE FROM samples WHERE rowid = 1")
    ]
    assert "105 ±5%" in proc.stdout, "L1 as measured"
    assert "108 ±2%" in proc.stdout, "L0 from its two good rows"
    csv = kvmlab(loose, "results", "export", "1")
    assert csv.returncode == 3 and len(csv.stdout.splitlines()) == 1 + 5


def test_an_unreadable_failure_is_named_and_the_run_listed(db: Path) -> None:
    tamper(db, "UPDATE failures SET exit_code = 'x'")
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        bad_line(
            db,
            "run 1, failure row 1",
            "exit_code is 'x', not a whole number",
            "DELETE FROM failures WHERE rowid = 1",
        )
    ]
    assert len(proc.stdout.splitlines()) == 2 + 3


def test_text_that_is_not_utf8_is_read_not_a_crash(db: Path) -> None:
    tamper(db, "UPDATE runs SET lab = CAST(X'6c61ff62' AS TEXT) WHERE id = 2")
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 0, proc.stderr
    assert "la\ufffdb" in proc.stdout


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "UPDATE meta SET value = 'abc'",
            "meta 'schema' is 'abc', not a schema number; the database was changed outside "
            "kvmlab: set it back (UPDATE meta SET value = '3' WHERE key = 'schema') or restore "
            "it from a backup",
        ),
        (
            "UPDATE meta SET value = '99'",
            "has schema 99, newer than this kvmlab (3): use the kvmlab that wrote it, or name "
            "another file",
        ),
        (
            "ALTER TABLE runs RENAME TO old_runs; CREATE TABLE runs (id INTEGER PRIMARY KEY, "
            "name TEXT)",
            "table runs lacks column(s) lab, lab_file, spec_digest, suite, kvmlab_version, "
            "host, started, ended, complete; it was changed outside kvmlab: restore it from "
            "a backup or name another file",
        ),
    ],
)
def test_a_damaged_schema_is_one_line(sql: str, message: str, db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.executescript(sql)
    conn.close()
    for args in (("results", "ls"), ("report", "1", "-o", "md")):
        proc = kvmlab(db, *args)
        assert proc.returncode == 3, proc.stderr
        separator = " " if message.startswith("has schema") else ": "
        assert proc.stderr.splitlines() == [f"kvmlab: {db}{separator}{message}"]


def test_many_bad_rows_are_named_up_to_a_limit(db: Path) -> None:
    tamper(db, "UPDATE samples SET level = 'x'")
    tamper(db, "INSERT INTO samples SELECT * FROM samples WHERE run = 3")  # 24 bad rows
    proc = kvmlab(db, "results", "export", "1")
    assert proc.returncode == 3
    lines = proc.stderr.splitlines()
    assert len(lines) == 6 and all("sample row" in line for line in lines)
    with ResultStore.reading(db) as store:
        for run in (1, 2, 3, 1, 3):  # read twice: each row named once
            assert store.samples(run) == []
        problems = store.problems
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1] == f"{db}: 4 more unreadable row(s)"


def test_host_facts_are_not_added_to_an_unreadable_host(db: Path) -> None:
    tamper(db, "UPDATE runs SET host = '[' WHERE id = 2")
    with ResultStore.writing(db) as store, pytest.raises(StoreError, match=r"run 2: host is not"):
        store.add_host_facts(2, {"x": 1})
