"""What a careless or hostile ``KVMLAB_RESULTS`` can name, each refused or read in one line,
never a hang or a traceback (issue 39, own pass): a pipe, a name too long, a file where a
directory should be, a database another process holds locked, one on a read-only
filesystem (read as it is; a writing command refused)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvmlab.cli.main import app
from kvmlab.results import store as store_module
from kvmlab.results.model import Run
from kvmlab.results.store import ResultStore, StoreError

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RESULTS": str(db), "KVMLAB_RUN_DIR": "/nonexistent/run"}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def test_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "r.sqlite"
    os.mkfifo(fifo)
    proc = kvmlab(fifo, "results", "ls")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: KVMLAB_RESULTS={fifo} is not a regular file; it names the results database file\n"
    )


@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_name_too_long_is_one_line(where: str, tmp_path: Path) -> None:
    long = "x" * 300
    db = tmp_path / f"{long}.sqlite" if where == "file" else tmp_path / long / "r.sqlite"
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: KVMLAB_RESULTS={db}: a name in it is longer than the filesystem allows; "
        "give a shorter name\n"
    )


def test_a_file_where_a_directory_should_be_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    db = tmp_path / "file" / "r.sqlite"
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: KVMLAB_RESULTS={db}: {tmp_path / 'file'} is not a directory; put the "
        "results database in a directory of your own\n"
    )


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "r.sqlite"
    monkeypatch.setenv("KVMLAB_RESULTS", str(path))
    with ResultStore.writing() as store:
        store.finish(store.start(Run(0, "lab", "/x", "d", "quick", "0", time.time())))
    with sqlite3.connect(path) as conn:  # a rollback journal: a writer locks readers out
        conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    return path


def test_a_database_locked_by_another_process_is_one_line(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "READ_TIMEOUT", 0.2)
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("UPDATE runs SET suite = 'full'")
        locked.set()
        release.wait(10)
        conn.execute("ROLLBACK")
        conn.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        result = CliRunner().invoke(app, ["results", "ls"])
    finally:
        release.set()
        holder.join()
    assert isinstance(result.exception, StoreError)
    assert str(result.exception) == (
        f"cannot open the results database {db}: database is locked; another program holds "
        "it locked; try again when it is done"
    )
    result = CliRunner().invoke(app, ["results", "ls"])
    assert result.exit_code == 0 and "quick" in result.stdout, "read once it is released"


def test_a_read_only_place_is_read_as_it_is(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where SQLite cannot make its shared-memory file (a read-only filesystem), the database
    is read as immutable rather than refused; a writing command says why it cannot store."""
    real = sqlite3.connect
    opened: list[str] = []

    def connect(target: str, timeout: float = 5.0, uri: bool = False) -> sqlite3.Connection:
        opened.append(str(target))
        if str(target).endswith("mode=ro"):  # as on a read-only mount
            error = sqlite3.OperationalError("unable to open database file")
            error.sqlite_errorname = "SQLITE_CANTOPEN"
            raise error
        return real(target, timeout=timeout, uri=uri)

    monkeypatch.setattr(sqlite3, "connect", connect)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    result = CliRunner().invoke(app, ["results", "ls"])
    assert result.exit_code == 0, result.output
    assert "lab" in result.stdout
    assert opened[-1].endswith("mode=ro&immutable=1")

    def read_only(_place: object) -> os.statvfs_result:
        return os.statvfs_result((0,) * 8 + (os.ST_RDONLY, 255, 0))

    monkeypatch.setattr(os, "access", lambda *_a: False)
    monkeypatch.setattr(os, "statvfs", read_only)
    with pytest.raises(StoreError) as info:
        ResultStore.writing()
    assert str(info.value) == (
        f"cannot store runs in {db}: {db.parent} is not writable (read-only filesystem); make "
        "it writable or name a database elsewhere with KVMLAB_RESULTS"
    )
