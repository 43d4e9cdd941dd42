"""A results database that is not kvmlab's is refused in one line and left byte for byte as
it was; a reading command never creates, migrates, converts or chmods anything. The
installed command runs as a user would; nothing boots."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.migrate.engine_common import Workload
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.stored import auto_by_hand
from kvmlab.migrate.transports.base import Route
from kvmlab.results.model import Run
from kvmlab.results.store import APPLICATION_ID, SCHEMA_VERSION, ResultStore
from kvmlab.runtime.rundir import GuestRecord
from tests.results.test_store import SCHEMA_1

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
LABS = Path(__file__).resolve().parents[2] / "labs"


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "COLUMNS": "200",
        "KVMLAB_RESULTS": str(db),
        "KVMLAB_RUN_DIR": str(db.parent.parent / "run"),
    }
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    """Every file below ``directory``: its content's hash and its mode."""
    return {
        str(p.relative_to(directory)): (
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir",
            p.stat().st_mode,
        )
        for p in sorted(directory.rglob("*"))
    }


def app_database(path: Path, journal: str = "delete", app_id: int = 0) -> Path:
    """Another program's database: a ``users`` table, mode 0644."""
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA journal_mode={journal}")
    db.execute(f"PRAGMA application_id={app_id}")
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO users (name) VALUES ('alice')")
    db.commit()
    db.close()
    path.chmod(0o644)
    return path


READING = {
    "ls": ("results", "ls"),
    "ls-json": ("results", "ls", "-o", "json"),
    "show": ("report", "1"),
    "export": ("results", "export", "1"),
    "report": ("report",),
    "report-html": ("report", "1", "-o", "html"),
}
REFUSED = (
    "is a SQLite database that is not kvmlab's (no kvmlab meta and runs tables; its tables: "
    "users); kvmlab will not touch it: name a new file or a kvmlab results database"
)


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize("command", sorted(READING))
def test_reading_commands_refuse_another_programs_database_untouched(
    command: str, journal: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = app_database(home / "app.db", journal)
    before = snapshot(home)
    proc = kvmlab(db, *READING[command])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"kvmlab: KVMLAB_RESULTS={db} {REFUSED}"]
    assert proc.stdout == ""
    assert snapshot(home) == before, "same bytes, same mode, no -wal or -shm file"


def test_a_writing_command_refuses_it_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = app_database(home / "app.db")
    before = snapshot(home)
    proc = kvmlab(db, "bench", str(LABS / "basic.toml"), "--levels", "L0")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"kvmlab: KVMLAB_RESULTS={db} {REFUSED}"]
    with pytest.raises(UsageError, match="not kvmlab's"):
        ResultStore.writing(db)
    assert snapshot(home) == before


def test_another_programs_application_id_is_refused_even_with_kvmlab_tables(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = app_database(home / "app.db", app_id=1234)
    with sqlite3.connect(db) as conn:
        conn.executescript(SCHEMA_1)
    before = snapshot(home)
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"kvmlab: KVMLAB_RESULTS={db} is a SQLite database of another program (application "
        "id 0x4d2); kvmlab will not touch it: name a new file or a kvmlab results database"
    ]
    assert snapshot(home) == before


def test_a_meta_table_alone_is_no_kvmlab_database(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO meta VALUES ('schema', '7')")
    before = snapshot(home)
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 2, proc.stderr
    assert "(no kvmlab meta and runs tables; its tables: meta)" in proc.stderr
    assert snapshot(home) == before


def empty_sqlite(path: Path, user_version: int = 0) -> Path:
    """A SQLite file with its header and no table (what ``sqlite3 FILE 'VACUUM'`` leaves)."""
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version={user_version}")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")
    conn.close()
    path.chmod(0o644)
    return path


def test_an_empty_sqlite_file_is_read_as_no_results_and_adopted_only_to_write(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = empty_sqlite(home / "r.sqlite")
    before = snapshot(home)
    proc = kvmlab(db, "results", "ls")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"no results yet ({db} is an empty SQLite database)\n"
    proc = kvmlab(db, "report")
    assert proc.returncode == 2
    assert proc.stderr == f"kvmlab: no results yet ({db} is an empty SQLite database)\n"
    assert snapshot(home) == before
    with ResultStore.writing(db) as store:  # bench or run: nothing in it to lose
        assert store.runs() == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
    assert db.stat().st_mode & 0o777 == 0o600


def test_an_empty_database_with_a_user_version_is_another_programs(tmp_path: Path) -> None:
    db = empty_sqlite(tmp_path / "r.sqlite", user_version=5)
    before = db.read_bytes()
    with pytest.raises(UsageError, match=r"another program \(user version 5\)"):
        ResultStore.writing(db)
    assert db.read_bytes() == before


def test_reading_a_missing_database_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "results.sqlite"
    proc = kvmlab(db, "results", "ls")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"no results yet ({db} does not exist)\n"
    for args in (("report",), ("report", "last"), ("results", "export", "1")):
        proc = kvmlab(db, *args)
        assert proc.returncode == 2, args
        assert proc.stderr == f"kvmlab: no results yet ({db} does not exist)\n", args
    assert list(home.iterdir()) == []


def test_reading_the_default_database_creates_no_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "KVMLAB_RESULTS"}
    proc = subprocess.run(
        [KVMLAB, "results", "ls"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "XDG_DATA_HOME": str(data), "KVMLAB_RUN_DIR": str(tmp_path / "run")},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"no results yet ({data}/kvmlab/results.sqlite does not exist)\n"
    assert not data.exists()


def older_kvmlab_database(path: Path) -> Path:
    """A schema 1 database (rollback journal, no application id), as an older kvmlab left
    it, and made readable by others."""
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_1)
    conn.close()
    path.chmod(0o644)
    return path


@pytest.mark.parametrize("command", sorted(READING))
def test_reading_an_older_kvmlab_database_changes_nothing(command: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = older_kvmlab_database(home / "r.sqlite")
    before = snapshot(home)
    proc = kvmlab(db, *READING[command])
    assert proc.returncode == 0, proc.stderr
    assert "old" in proc.stdout or "events_per_s" in proc.stdout
    assert snapshot(home) == before, "no schema migrated, no WAL, no chmod"


def test_a_writing_command_migrates_an_older_kvmlab_database(tmp_path: Path) -> None:
    db = older_kvmlab_database(tmp_path / "r.sqlite")
    with ResultStore.writing(db) as store:
        assert [r.lab for r in store.runs()] == ["old"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"failures", "documents"} <= tables
    assert db.stat().st_mode & 0o777 == 0o600


def test_migrate_auto_reads_the_history_without_changing_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kvmlab migrate --mode auto`` only reads the stored comparisons."""
    from kvmlab.migrate import stored

    record = GuestRecord(
        lab="old",
        address=["vm"],
        pid=1,
        argv=["/usr/bin/qemu-system-x86_64", "-name", "vm"],
        accel="tcg",
        accel_reason="",
        vcpus=1,
        memory=1 << 29,
        started=0.0,
    )
    monkeypatch.setattr(stored, "running_source", lambda _a: (None, None, record))
    home = tmp_path / "home"
    home.mkdir()
    for make in (older_kvmlab_database, app_database):
        db = make(home / f"{make.__name__}.sqlite")
        monkeypatch.setenv("KVMLAB_RESULTS", str(db))
        before = snapshot(home)
        settings, reason = auto_by_hand("old/vm", Settings(mode="auto"), Workload(128, 60), Route())
        assert settings == Settings(mode="auto"), reason
        assert snapshot(home) == before, make.__name__
        if make is app_database:
            assert reason.startswith(f"the results ({db}) could not be read: ")
            assert "not kvmlab's" in reason
        else:
            assert reason.startswith("no verified migration of this guest")


FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
"""A query that never ends: what a view in place of kvmlab's table could hold."""
NOT_PLAIN = {
    "meta view": (
        "DROP TABLE meta; "
        f"CREATE VIEW meta AS {FOREVER} SELECT 'schema' AS key, x AS value FROM c WHERE x < 0",
        "its meta is a view, not a table",
    ),
    "runs view": (
        "ALTER TABLE runs RENAME TO kept; "
        f"CREATE VIEW runs AS {FOREVER} SELECT kept.* FROM kept, c",
        "its runs is a view, not a table",
    ),
    "view named in capitals": (
        f"DROP TABLE samples; CREATE VIEW SAMPLES AS {FOREVER} SELECT x AS run FROM c",
        "its samples is a view, not a table",
    ),
    "trigger": (
        "CREATE TRIGGER grow AFTER INSERT ON samples BEGIN "
        "INSERT INTO samples SELECT * FROM samples; END",
        "a trigger, grow, on its samples table",
    ),
    "virtual table": (
        "DROP TABLE documents; CREATE VIRTUAL TABLE documents USING fts5(run, variant, kind, body)",
        "its documents is a virtual table, not a plain table",
    ),
    "generated column": (
        "DROP TABLE failures; CREATE TABLE failures (run INTEGER, variant TEXT, level TEXT, "
        "guest TEXT, stage TEXT, message TEXT, exit_code INTEGER, "
        "detail TEXT GENERATED ALWAYS AS (printf('%.*c', 1000, 'x')) VIRTUAL)",
        "its failures table computes detail",
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_PLAIN))
def test_kvmlabs_tables_must_be_plain_tables(case: str, tmp_path: Path) -> None:
    """A view (an endless query), a trigger, a virtual table or a computed column in place
    of kvmlab's tables, even under kvmlab's application id: refused at once, untouched."""
    home = tmp_path / "home"
    home.mkdir()
    db = home / "r.sqlite"
    with ResultStore.writing(db) as store:
        store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", 1.0))
    sql, why = NOT_PLAIN[case]
    with sqlite3.connect(db) as conn:
        conn.executescript(sql)
    conn.close()
    before = snapshot(home)
    start = time.monotonic()
    proc = kvmlab(db, "results", "ls")
    assert time.monotonic() - start < 30
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"kvmlab: KVMLAB_RESULTS={db} is a SQLite database that is not kvmlab's ({why}); "
        "kvmlab will not touch it: name a new file or a kvmlab results database"
    ]
    for opened in (ResultStore.reading, ResultStore.writing):
        with pytest.raises(UsageError, match=f"not kvmlab's \\({why}\\)"):
            opened(db)
    assert snapshot(home) == before
