"""The results store: one SQLite (WAL) file, private (0600), schema versioned.

Every sample is committed as it is measured, so a run that is interrupted keeps
what it measured; :meth:`ResultStore.finish` marks a run complete. Runs never
finished stay ``complete = 0`` and are shown as incomplete; what cut a run short is
kept beside it (:meth:`ResultStore.add_failure`).

Schema 2 added the ``failures`` table, schema 3 the ``documents`` table (what a workload
records beyond samples: a live migration's time series and checks); an older database
gains them when opened.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from kvmlab.errors import KvmlabError, UsageError, printable
from kvmlab.paths import unsafe_parent
from kvmlab.results.model import Failure, Run, Sample

SCHEMA_VERSION = 3
DB_FILE = "results.sqlite"
RESULTS_ENV = "KVMLAB_RESULTS"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    lab TEXT NOT NULL, lab_file TEXT NOT NULL, spec_digest TEXT NOT NULL,
    suite TEXT NOT NULL, kvmlab_version TEXT NOT NULL, host TEXT NOT NULL,
    started REAL NOT NULL, ended REAL, complete INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS samples (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    variant TEXT NOT NULL, guest TEXT NOT NULL, level TEXT NOT NULL, accel TEXT NOT NULL,
    workload TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL, repetition INTEGER NOT NULL, command TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_run ON samples(run);
CREATE TABLE IF NOT EXISTS failures (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    variant TEXT NOT NULL, level TEXT NOT NULL, guest TEXT NOT NULL, stage TEXT NOT NULL,
    message TEXT NOT NULL, exit_code INTEGER, detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    variant TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL
);
"""

SAMPLE_COLUMNS = (
    "variant",
    "guest",
    "level",
    "accel",
    "workload",
    "metric",
    "value",
    "unit",
    "higher_is_better",
    "repetition",
    "command",
)
FAILURE_COLUMNS = ("variant", "level", "guest", "stage", "message", "exit_code", "detail")


class StoreError(KvmlabError):
    """The results database cannot be used (newer schema, corrupt file)."""

    exit_code = 3


def default_results_path() -> Path:
    """``$KVMLAB_RESULTS`` (the database file), else ``results.sqlite`` in
    ``$XDG_DATA_HOME/kvmlab`` or ``~/.local/share/kvmlab``."""
    if env := os.environ.get(RESULTS_ENV):
        return Path(env)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "kvmlab" / DB_FILE


def prepare_database_file(path: Path, shown: str) -> None:
    """Make sure ``path`` can be the database: a regular file (created 0600) in an existing
    directory; ``shown`` names it in errors (``KVMLAB_RESULTS=/x``)."""
    if not path.is_absolute():
        raise UsageError(f"{shown}: give an absolute path to the results database file")
    check_place(path, shown)
    if path.is_symlink():
        raise UsageError(f"{shown} is a symlink; name the database file itself")
    if path.is_dir():
        raise UsageError(
            f"{shown} is a directory; it names the results database file, e.g. {path / DB_FILE}"
        )
    if path.exists() and not path.is_file():
        raise UsageError(f"{shown} is not a regular file; it names the results database file")
    if path.exists() and not _is_sqlite(path):
        raise UsageError(
            f"{shown} is a file that is not a SQLite database; kvmlab will not "
            "touch it: name a new file or an existing results database"
        )
    if not path.parent.is_dir():
        raise UsageError(
            f"{shown}: directory {path.parent} does not exist; "
            "create it first or choose another path"
        )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.close(fd)
    except FileExistsError:
        _make_private(path)
    except OSError as exc:
        raise StoreError(f"cannot create the results database {path}: {exc.strerror}") from None


def check_place(path: Path, shown: str) -> None:
    """Refuse a database file below a directory another user could swap it in (writable by
    others without the sticky bit, or theirs), as the run directory is refused."""
    if why := unsafe_parent(path):
        raise UsageError(
            printable(f"{shown}: {why}; put the results database in a directory of your own")
        )


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's header (checked before it is opened or chmod'ed)."""
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\0"
    except OSError:
        return False


def _make_private(path: Path) -> None:
    """Tighten a database (and its WAL files) written by an older kvmlab to 0600."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = file.stat()
            if st.st_mode & 0o077 and st.st_uid == os.geteuid():
                file.chmod(0o600)
        except OSError:
            pass


class ResultStore:
    """Runs and samples in one SQLite file; a context manager that closes it."""

    def __init__(self, path: Path | None = None) -> None:
        env = os.environ.get(RESULTS_ENV)
        if path is not None:
            shown = f"the results database {path}"
        elif env:
            path, shown = Path(env), f"{RESULTS_ENV}={env}"
        else:  # kvmlab's own data directory: created, private
            path = default_results_path()
            shown = f"the results database {path}"
            check_place(path, shown)
            try:
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create {path.parent}: {exc.strerror}") from None
        self.path = path
        prepare_database_file(path, shown)
        try:
            self._db = sqlite3.connect(self.path, timeout=30)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the results database {path}: {exc}") from None
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path}: not a usable results database ({exc})") from exc

    def _migrate(self) -> None:
        """Create what is missing; schemas 1 and 2 only lack tables added since."""
        with self._db:
            found = None
            query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
            if self._db.execute(query).fetchone() is not None:
                row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                found = None if row is None else int(row[0])
            if found is not None and found > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema {found}, newer than this kvmlab ({SCHEMA_VERSION})"
                )
            self._db.executescript(_SCHEMA)
            if found != SCHEMA_VERSION:
                self._db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._db:
            yield self._db

    # -- writing -------------------------------------------------------------------------

    def start(self, run: Run) -> int:
        """Record a new run; returns its id (also set on ``run``)."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO runs (lab, lab_file, spec_digest, suite, kvmlab_version, host, "
                "started) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run.lab,
                    run.lab_file,
                    run.spec_digest,
                    run.suite,
                    run.kvmlab_version,
                    json.dumps(run.host, sort_keys=True),
                    run.started,
                ),
            )
        run.id = int(cur.lastrowid or 0)
        return run.id

    def add(self, run_id: int, samples: Iterable[Sample]) -> None:
        """Store samples at once (one transaction), so nothing measured is lost. A value
        that is not a finite number is never stored: the run records how many were dropped."""
        kept: list[Sample] = []
        dropped: dict[tuple[str, str, str, str], int] = {}
        for s in samples:
            if math.isfinite(s.value):
                kept.append(s)
            else:
                where = (s.variant, s.level, s.guest, s.workload)
                dropped[where] = dropped.get(where, 0) + 1
        for (variant, level, guest, workload), count in dropped.items():
            message = f"dropped {count} value(s) that are not finite numbers"
            self.add_failure(run_id, Failure(variant, level, guest, workload, message, None))
        rows = [(run_id, *(getattr(s, c) for c in SAMPLE_COLUMNS)) for s in kept]
        marks = ", ".join("?" * (len(SAMPLE_COLUMNS) + 1))
        with self._tx() as db:
            db.executemany(
                f"INSERT INTO samples (run, {', '.join(SAMPLE_COLUMNS)}) VALUES ({marks})", rows
            )

    def add_host_facts(self, run_id: int, facts: dict[str, object]) -> None:
        """Add what was learnt during the run (e.g. why an L2 got TCG) to its host facts."""
        with self._tx() as db:
            row = db.execute("SELECT host FROM runs WHERE id = ?", (run_id,)).fetchone()
            host = {**json.loads(row[0]), **facts}
            db.execute(
                "UPDATE runs SET host = ? WHERE id = ?", (json.dumps(host, sort_keys=True), run_id)
            )

    def add_failure(self, run_id: int, failure: Failure) -> None:
        """Record what cut the run short (a run may have several: an error, then teardown's)."""
        marks = ", ".join("?" * (len(FAILURE_COLUMNS) + 1))
        with self._tx() as db:
            db.execute(
                f"INSERT INTO failures (run, {', '.join(FAILURE_COLUMNS)}) VALUES ({marks})",
                (run_id, *(getattr(failure, c) for c in FAILURE_COLUMNS)),
            )

    def add_document(self, run_id: int, variant: str, kind: str, body: dict[str, Any]) -> None:
        """Keep a JSON document of a run (``kind`` names its schema, e.g. ``migrations``)."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO documents (run, variant, kind, body) VALUES (?, ?, ?, ?)",
                (run_id, variant, kind, json.dumps(body, sort_keys=True)),
            )

    def finish(self, run_id: int, complete: bool = True) -> None:
        """Mark the run ended (and complete, unless it was cut short)."""
        with self._tx() as db:
            db.execute(
                "UPDATE runs SET ended = ?, complete = ? WHERE id = ?",
                (time.time(), int(complete), run_id),
            )

    # -- reading -------------------------------------------------------------------------

    def runs(self) -> list[Run]:
        """Every run, newest first."""
        rows = self._db.execute("SELECT * FROM runs ORDER BY id DESC").fetchall()
        failures = self._failures()
        return [_run(r, failures.get(int(r["id"]), [])) for r in rows]

    def run(self, ref: str | int) -> Run:
        """A run by id, or ``last`` for the newest."""
        if ref == "last" or ref == "--last":
            row = self._db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            if row is None:
                raise UsageError(f"no runs in {self.path} yet")
            return _run(row, self._failures(int(row["id"])).get(int(row["id"]), []))
        run_id = parse_run_id(ref)
        row = None
        if run_id <= MAX_RUN_ID:  # SQLite's integers are 64-bit: a larger id is no run
            row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"no run {run_id} in {self.path}")
        return _run(row, self._failures(run_id).get(run_id, []))

    def _failures(self, run_id: int | None = None) -> dict[int, list[Failure]]:
        """Run id -> its failures in the order they were recorded (of one run, or all)."""
        where = "" if run_id is None else "WHERE run = ?"
        rows = self._db.execute(
            f"SELECT run, {', '.join(FAILURE_COLUMNS)} FROM failures {where} ORDER BY rowid",
            () if run_id is None else (run_id,),
        ).fetchall()
        out: dict[int, list[Failure]] = {}
        for r in rows:
            out.setdefault(int(r["run"]), []).append(Failure(*(r[c] for c in FAILURE_COLUMNS)))
        return out

    def samples(self, run_id: int) -> list[Sample]:
        """The samples of a run in measurement order."""
        rows = self._db.execute(
            f"SELECT {', '.join(SAMPLE_COLUMNS)} FROM samples WHERE run = ? ORDER BY rowid",
            (run_id,),
        ).fetchall()
        return [  # a value that is not finite (stored by an older kvmlab) is no measurement
            Sample(**{**dict(r), "higher_is_better": bool(r["higher_is_better"])})
            for r in rows
            if isinstance(r["value"], int | float) and math.isfinite(r["value"])
        ]

    def documents(self, run_id: int, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """(variant, document) of one kind, in the order they were stored."""
        rows = self._db.execute(
            "SELECT variant, body FROM documents WHERE run = ? AND kind = ? ORDER BY rowid",
            (run_id, kind),
        ).fetchall()
        return [(str(r["variant"]), json.loads(r["body"])) for r in rows]

    def sample_counts(self) -> dict[int, int]:
        """Run id -> number of samples stored, for every run with samples."""
        rows = self._db.execute("SELECT run, COUNT(*) FROM samples GROUP BY run").fetchall()
        return {int(r[0]): int(r[1]) for r in rows}

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


MAX_RUN_ID = (1 << 63) - 1
"""SQLite's largest integer."""


def parse_run_id(ref: str | int) -> int:
    """A run id: a positive whole number in ASCII digits (any size; none is negative)."""
    if isinstance(ref, int):
        return ref
    if not (ref.isascii() and ref.isdigit()) or len(ref) > 100 or int(ref) == 0:
        shown = ref if len(ref) <= 40 else ref[:37] + "..."
        raise UsageError(f"{printable(repr(shown))} is not a run id (see kvmlab results ls)")
    return int(ref)


def _run(row: sqlite3.Row, failures: list[Failure]) -> Run:
    data: dict[str, Any] = dict(row)
    data["host"] = json.loads(data["host"])
    data["complete"] = bool(data["complete"])
    return Run(**data, failures=failures)
