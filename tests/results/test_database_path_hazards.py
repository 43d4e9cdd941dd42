"""What a careless or hostile ``KVMLAB_RESULTS`` can name, each refused or read in one line,
never a hang or a traceback: a pipe, a name too long, a file where a
directory should be, a database another process holds locked, one on a read-only
filesystem (read as it is; a writing command refused), a ``-wal``/``-shm``/``-journal``
beside it that is a link (named for what it is), a relative ``XDG_DATA_HOME`` (ignored, as
the XDG specification says)."""

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
from kvmlab.errors import UsageError
from kvmlab.paths import data_dir
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


SIDE_FILES = {"-wal": "write-ahead log", "-shm": "WAL index file", "-journal": "journal"}


@pytest.mark.parametrize("end", sorted(SIDE_FILES))
@pytest.mark.parametrize("command", [("results", "ls"), ("report", "1")])
def test_a_link_beside_the_database_is_named_for_what_it_is(
    end: str, command: tuple[str, ...], db: Path, tmp_path: Path
) -> None:
    """A ``-shm`` (``-wal``, ``-journal``) that is a symbolic link is no damaged database
    to restore from a backup: the line says what it is and what to do."""
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    side = db.with_name(db.name + end)
    side.symlink_to(target)
    if end == "-shm":  # with a -wal beside it SQLite would open the -shm (through the link)
        db.with_name(db.name + "-wal").write_bytes(b"")
    proc = kvmlab(db, *command)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"kvmlab: KVMLAB_RESULTS={db}: its {SIDE_FILES[end]} {side} is a symbolic link; "
        "kvmlab does not open through links: remove the link\n"
    )
    assert target.read_bytes() == b"" and side.is_symlink()
    with pytest.raises(UsageError, match="is a symbolic link"):
        ResultStore.writing(db)


def test_a_directory_beside_the_database_is_named_for_what_it_is(db: Path) -> None:
    side = db.with_name(db.name + "-wal")
    side.mkdir()
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"kvmlab: KVMLAB_RESULTS={db}: its write-ahead log {side} is not a regular file; "
        "SQLite keeps its write-ahead log in one: remove it\n"
    )


@pytest.mark.parametrize("value", ["data", "./share", "rel/data"])
def test_a_relative_xdg_data_home_is_ignored(value: str, tmp_path: Path) -> None:
    """The XDG Base Directory specification: a relative path in XDG_DATA_HOME is invalid
    and ignored; kvmlab falls back to ~/.local/share, without a word."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KVMLAB_RESULTS"}
    env |= {"HOME": str(home), "XDG_DATA_HOME": value, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    proc = subprocess.run(
        [KVMLAB, "results", "ls"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    default = home / ".local" / "share" / "kvmlab" / "results.sqlite"
    assert proc.stdout.split() == ["no", "results", "yet", f"({default}", "does", "not", "exist)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"], "nothing made in the cwd"


def test_data_dir_takes_only_an_absolute_xdg_data_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KVMLAB_RESULTS", raising=False)
    fallback = tmp_path / ".local" / "share" / "kvmlab"
    for value, expected in [
        ("", fallback),
        ("data", fallback),
        ("./x", fallback),
        ("/srv/data", Path("/srv/data/kvmlab")),
    ]:
        monkeypatch.setenv("XDG_DATA_HOME", value)
        assert data_dir() == expected, value
        assert store_module.default_results_path() == expected / "results.sqlite", value
