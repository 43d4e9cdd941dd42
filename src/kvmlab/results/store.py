"""The results store: one SQLite (WAL) file, private (0600), schema versioned.

Every sample is committed as it is measured, so a run that is interrupted keeps
what it measured; :meth:`ResultStore.finish` marks a run complete. Runs never
finished stay ``complete = 0`` and are shown as incomplete; what cut a run short is
kept beside it (:meth:`ResultStore.add_failure`).

Schema 2 added the ``failures`` table, schema 3 the ``documents`` table (what a workload
records beyond samples: a live migration's time series and checks); an older database
gains them when a writing command opens it.

**Whose file it is.** kvmlab opens a database only when it can tell it is its own: SQLite's
``application_id`` is :data:`APPLICATION_ID` (stamped by every writing command), or, for a
database written before kvmlab stamped it, a ``meta`` table holding the ``schema`` key beside
a ``runs`` table. Anything else is another program's and is refused before anything is
changed (no schema, no journal mode, no chmod, no ``-wal``/``-shm`` files). A SQLite file
with no tables at all (nothing to damage) is adopted by a writing command only.

**Reading and writing.** :meth:`ResultStore.reading` (``results``, ``report``, ``migrate
--mode auto``) opens the file read-only (``mode=ro``): it never creates the file or its
directory, never creates or migrates tables, never changes the journal mode or the file's
mode; a missing file is no runs yet. :meth:`ResultStore.writing` (``bench``, ``run``)
creates the file (0600) or migrates an older schema.

**Reading back.** Every row is checked like user input (:mod:`kvmlab.results.validate`);
a row that is not what kvmlab wrote is left out and named in :attr:`ResultStore.problems`
(file, row, field, how to fix it), so one bad row never hides the others. A value that is
not a finite number (``1e400`` stored outside kvmlab, or by an older kvmlab) is no measurement:
it is left out and counted (:meth:`ResultStore.left_out`, :meth:`ResultStore.not_finite_counts`)
so that reports can say how many.

**A file from anyone.** kvmlab's tables must be plain tables: a view (whose query may never
end), a virtual table, a trigger on them or a generated column in them makes the file
refused as not kvmlab's; a ``-wal``, ``-shm`` or ``-journal`` beside it that is a symbolic
link (or not a file) is refused too, named for what it is. Every connection
has a progress handler, so that a signal (Ctrl-C, SIGTERM) stops a long query: SQLite ends it
as ``interrupted``, which is raised as :class:`KeyboardInterrupt` (the CLI exits 130).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

from kvmlab.errors import KvmlabError, UsageError, printable
from kvmlab.paths import data_dir, unsafe_parent
from kvmlab.results import validate as valid
from kvmlab.results.model import Failure, Run, Sample

SCHEMA_VERSION = 3
DB_FILE = "results.sqlite"
RESULTS_ENV = "KVMLAB_RESULTS"
APPLICATION_ID = 0x6B766D6C
"""SQLite's ``PRAGMA application_id`` of a kvmlab results database (``kvml``)."""

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
RUN_COLUMNS = (
    "id",
    "lab",
    "lab_file",
    "spec_digest",
    "suite",
    "kvmlab_version",
    "host",
    "started",
    "ended",
    "complete",
)
DOCUMENT_COLUMNS = ("run", "variant", "kind", "body")
TABLE_COLUMNS = {
    "runs": RUN_COLUMNS,
    "samples": ("run", *SAMPLE_COLUMNS),
    "failures": ("run", *FAILURE_COLUMNS),
    "documents": DOCUMENT_COLUMNS,
}
"""The columns kvmlab reads from each of its tables."""

MAX_RUN_ID = (1 << 63) - 1
"""SQLite's largest integer."""
MAX_REPETITION = (1 << 31) - 1
MAX_PROBLEMS = 20
"""Unreadable rows named one by one; beyond these, how many more."""
LEVELS_READ = frozenset(f"L{depth}" for depth in range(100))
"""A level as kvmlab stores it: ``L0`` (the host), ``L1``, ``L2``, ... (up to L99)."""
READ_TIMEOUT, WRITE_TIMEOUT = 10.0, 30.0
"""Seconds to wait for another kvmlab's lock before giving up."""
KVMLAB_TABLES = ("meta", *TABLE_COLUMNS)
"""kvmlab's tables: plain tables in a file kvmlab opens (never views, never with triggers)."""
SIDE_FILES = (("-wal", "write-ahead log"), ("-shm", "WAL index file"), ("-journal", "journal"))
"""The files SQLite keeps beside a database, and what each is."""
PROGRESS_STEPS = 10_000
"""SQLite virtual-machine steps between two calls of the progress handler (about 0.1 ms
of a query): how soon a signal stops a query."""
PAGE = 5_000
"""Sample rows read at a time when a run's samples are streamed."""


class StoreError(KvmlabError):
    """The results database cannot be used (newer schema, corrupt file)."""

    exit_code = 3


class UnreadableRows(StoreError):
    """Rows that are not what kvmlab wrote, one line each; what could be read was used."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    def lines(self) -> list[str]:
        return list(self.problems)


def default_results_path() -> Path:
    """``$KVMLAB_RESULTS`` (the database file), else ``results.sqlite`` in kvmlab's data
    directory (:func:`kvmlab.paths.data_dir`: ``$XDG_DATA_HOME/kvmlab`` when that is an
    absolute path, else ``~/.local/share/kvmlab``)."""
    if env := os.environ.get(RESULTS_ENV):
        return Path(env)
    return data_dir() / DB_FILE


def check_place(path: Path, shown: str) -> None:
    """Refuse a database file below a directory another user could swap it in (writable by
    others without the sticky bit, or theirs), as the run directory is refused."""
    try:
        why = unsafe_parent(path)
    except OSError as exc:  # a name longer than the filesystem takes, a loop of links
        raise UsageError(f"{shown}: {_path_error(exc)}") from None
    if why:
        raise UsageError(
            printable(f"{shown}: {why}; put the results database in a directory of your own")
        )


def _path_error(exc: OSError) -> str:
    """What an OSError about the database's path means, and what to do."""
    if exc.errno == errno.ENAMETOOLONG:
        return "a name in it is longer than the filesystem allows; give a shorter name"
    if exc.errno == errno.ELOOP:
        return "its directories are symbolic links in a loop"
    return f"cannot be read ({exc.strerror or exc})"


def _check_path(path: Path, shown: str) -> bool:
    """Refuse what cannot be the database (relative, a link, a directory, a device, a file
    that is not SQLite); True when a file is there, False when there is none."""
    if not path.is_absolute():
        raise UsageError(f"{shown}: give an absolute path to the results database file")
    check_place(path, shown)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        raise UsageError(f"{shown}: {printable(str(path.parent))} is not a directory") from None
    except OSError as exc:
        raise UsageError(f"{shown}: {_path_error(exc)}") from None
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"{shown} is a symlink; name the database file itself")
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(
            f"{shown} is a directory; it names the results database file, e.g. "
            f"{printable(str(path / DB_FILE))}"
        )
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{shown} is not a regular file; it names the results database file")
    if not _is_sqlite(path):
        raise UsageError(
            f"{shown} is a file that is not a SQLite database; kvmlab will not "
            "touch it: name a new file or an existing results database"
        )
    _check_side_files(path, shown)
    return True


def _check_side_files(path: Path, shown: str) -> None:
    """Refuse a ``-wal``, ``-shm`` or ``-journal`` beside the database that SQLite would
    open through a link, or that is not a file at all, saying what it is."""
    for end, what in SIDE_FILES:
        side = path.with_name(path.name + end)
        name = printable(str(side))
        try:
            info = side.lstat()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"{shown}: its {what} {name}: {_path_error(exc)}") from None
        if stat.S_ISLNK(info.st_mode):
            raise UsageError(
                f"{shown}: its {what} {name} is a symbolic link; kvmlab does not open "
                "through links: remove the link"
            )
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(
                f"{shown}: its {what} {name} is not a regular file; SQLite keeps its "
                f"{what} in one: remove it"
            )


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a regular file starting with SQLite's header (read without
    following a link or waiting on a pipe, before SQLite or chmod ever sees it)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 16) == b"SQLite format 3\0"
    except OSError:
        return False
    finally:
        os.close(fd)


def _make_private(path: Path) -> None:
    """Tighten a database (and its WAL files) written by an older kvmlab to 0600."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = file.lstat()
            if st.st_mode & 0o077 and st.st_uid == os.geteuid() and not file.is_symlink():
                file.chmod(0o600)
        except OSError:
            pass


def _denied(place: Path) -> str:
    """``read-only filesystem`` or ``permission denied``."""
    try:
        if os.statvfs(place).f_flag & os.ST_RDONLY:
            return "read-only filesystem"
    except OSError:
        pass
    return "permission denied"


def _uri(path: Path, immutable: bool = False) -> str:
    """A read-only SQLite URI for ``path`` (``?``, ``#`` and ``%`` in it escaped)."""
    return f"file:{quote(str(path), safe='/')}?mode=ro" + ("&immutable=1" if immutable else "")


@dataclass(frozen=True)
class _Found:
    """What an existing database file holds: kvmlab's tables (and their schema), or none."""

    schema: int
    """0: a SQLite database without any table."""
    tables: frozenset[str]


def _distrust(db: sqlite3.Connection) -> None:
    """Run nothing a database file's own schema asks for (functions in its views, triggers
    or indexes): the file may come from anyone."""
    db.execute("PRAGMA trusted_schema = OFF")


def _connect(target: str | Path, timeout: float, uri: bool = False) -> sqlite3.Connection:
    """A connection whose queries a signal can stop (see :func:`_tick`)."""
    db = sqlite3.connect(target, uri=uri, timeout=timeout)
    db.set_progress_handler(_tick, PROGRESS_STEPS)
    return db


def _tick() -> int:
    """SQLite's progress handler: a Python call during a long query, so that a signal's
    handler runs there. When it raises (Ctrl-C's KeyboardInterrupt, SIGTERM's alike) the
    query stops with ``interrupted`` (:func:`_interrupted` raises it again); 0 goes on."""
    return 0


def _interrupted(exc: sqlite3.Error) -> None:
    """Raise :class:`KeyboardInterrupt` for a query a signal stopped (through :func:`_tick`):
    the interrupt, not a database error, is what happened."""
    if isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted":
        raise KeyboardInterrupt from None


def _identify(path: Path, shown: str) -> _Found:
    """Whose database ``path`` is, read without changing anything (not even ``-wal`` or
    ``-shm`` files: unless both exist already, SQLite reads it as immutable)."""
    wal = [path.with_name(path.name + end) for end in ("-wal", "-shm")]
    immutable = not all(p.exists() for p in wal)
    file = printable(str(path))
    try:
        db = _connect(_uri(path, immutable), READ_TIMEOUT, uri=True)
        try:
            _distrust(db)
            return _identity(db, file, shown)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        _interrupted(exc)
        raise StoreError(
            f"{file}: not a usable results database ({printable(str(exc))}); restore it "
            "from a backup or name another file"
        ) from None


def _identity(db: sqlite3.Connection, file: str, shown: str) -> _Found:
    app = int(db.execute("PRAGMA application_id").fetchone()[0])
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    objects = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    tables = frozenset(str(name) for kind, name, _, _ in objects if kind == "table")
    refuse = "kvmlab will not touch it: name a new file or a kvmlab results database"
    if app not in (0, APPLICATION_ID):
        raise UsageError(
            f"{shown} is a SQLite database of another program (application id "
            f"{app & 0xFFFFFFFF:#x}); {refuse}"
        )
    if not objects:
        if version and app != APPLICATION_ID:
            raise UsageError(
                f"{shown} is a SQLite database of another program (user version "
                f"{version}); {refuse}"
            )
        return _Found(0, frozenset())
    ours = app == APPLICATION_ID
    if not ours and not {"meta", "runs"} <= tables:
        names = ", ".join(sorted(printable(t) for t in tables)[:8]) or "none"
        raise UsageError(
            f"{shown} is a SQLite database that is not kvmlab's (no kvmlab meta and runs "
            f"tables; its tables: {names}); {refuse}"
        )
    if odd := _not_plain(objects) or _generated(db, tables):
        raise UsageError(f"{shown} is a SQLite database that is not kvmlab's ({odd}); {refuse}")
    damaged = "it was changed outside kvmlab: restore it from a backup or name another file"
    try:
        rows = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall()
    except sqlite3.OperationalError as exc:
        _interrupted(exc)
        if not ours:
            raise UsageError(
                f"{shown} is a SQLite database that is not kvmlab's (its meta table: "
                f"{printable(str(exc))}); {refuse}"
            ) from None
        raise StoreError(f"{file}: table meta is unreadable ({exc}); {damaged}") from None
    if not rows and not ours:
        raise UsageError(
            f"{shown} is a SQLite database that is not kvmlab's (its meta table has no "
            f"schema key); {refuse}"
        )
    guess = 3 if "documents" in tables else 2 if "failures" in tables else 1
    value = rows[0][0] if len(rows) == 1 else None
    text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
    if not re.fullmatch(r"[1-9][0-9]{0,3}", text):
        found = valid.shown(value) if len(rows) == 1 else f"{len(rows)} rows"
        raise StoreError(
            f"{file}: meta 'schema' is {found}, not a schema number; the database was "
            f"changed outside kvmlab: set it back (UPDATE meta SET value = '{guess}' WHERE "
            "key = 'schema') or restore it from a backup"
        )
    schema = int(text)
    if schema > SCHEMA_VERSION:
        raise StoreError(
            f"{file} has schema {schema}, newer than this kvmlab ({SCHEMA_VERSION}): "
            "use the kvmlab that wrote it, or name another file"
        )
    for table, wanted in TABLE_COLUMNS.items():
        if table not in tables:
            continue
        have = {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})").fetchall()}
        missing = [c for c in wanted if c not in have]
        if missing:
            raise StoreError(
                f"{file}: table {table} lacks column(s) {', '.join(missing)}; {damaged}"
            )
    return _Found(schema, tables)


def _not_plain(objects: Sequence[Sequence[Any]]) -> str | None:
    """What makes kvmlab's tables in ``sqlite_master`` rows (type, name, table, sql) other
    than plain tables (``its meta is a view, not a table``), or None. SQLite's names are
    the same in any case: ``META`` is what ``FROM meta`` reads."""
    for kind, name, on, sql in objects:
        low = str(name).lower()
        if low in KVMLAB_TABLES and kind != "table":
            return f"its {printable(low)} is a {printable(str(kind))}, not a table"
        if low in KVMLAB_TABLES and not str(sql).lstrip().upper().startswith("CREATE TABLE"):
            return f"its {printable(low)} is a virtual table, not a plain table"
        if kind == "trigger" and str(on).lower() in KVMLAB_TABLES:
            return f"a trigger, {printable(str(name))}, on its {printable(str(on).lower())} table"
    return None


def _generated(db: sqlite3.Connection, tables: Iterable[str]) -> str | None:
    """A generated column of kvmlab's tables (``its runs table computes lab``), or None:
    kvmlab stores every value, and an expression the file brings would be evaluated at
    every read (one call of a slow function is beyond any progress handler)."""
    for table in sorted(t for t in tables if t.lower() in KVMLAB_TABLES):
        for column in db.execute(f"PRAGMA table_xinfo({table})").fetchall():
            if column[6] in (2, 3):  # hidden: 2 generated (virtual), 3 generated (stored)
                return f"its {table.lower()} table computes {printable(str(column[1]))}"
    return None


def _bounded(column: str, limit: int) -> str:
    """``column`` as SQL reads it, text and blobs cut one character past ``limit`` (so an
    oversized value is seen as such without being read whole)."""
    return (
        f"CASE WHEN typeof({column}) IN ('text', 'blob') "
        f"THEN substr({column}, 1, {limit + 1}) ELSE {column} END"
    )


_RUN_SELECT = ", ".join(
    [
        "rowid",
        "id",
        _bounded("lab", valid.NAME_LIMIT),
        _bounded("lab_file", valid.NAME_LIMIT),
        _bounded("spec_digest", valid.NAME_LIMIT),
        _bounded("suite", valid.NAME_LIMIT),
        _bounded("kvmlab_version", valid.NAME_LIMIT),
        _bounded("host", valid.HOST_LIMIT),
        "started",
        "ended",
        "complete",
    ]
)
_SAMPLE_SELECT = ", ".join(
    [
        "rowid",
        *(
            _bounded(c, valid.TEXT_LIMIT if c == "command" else valid.NAME_LIMIT)
            if c not in ("value", "higher_is_better", "repetition")
            else c
            for c in SAMPLE_COLUMNS
        ),
    ]
)
_FAILURE_SELECT = ", ".join(
    [
        "rowid",
        "run",
        *(_bounded(c, valid.NAME_LIMIT) for c in ("variant", "level", "guest", "stage")),
        _bounded("message", valid.TEXT_LIMIT),
        "exit_code",
        _bounded("detail", valid.DETAIL_LIMIT),
    ]
)


def _lenient(raw: bytes) -> str:
    """Text that is not UTF-8 (written by hand), its bad bytes replaced, not a crash."""
    return raw.decode("utf-8", "replace")


class ResultStore:
    """Runs and samples in one SQLite file; a context manager that closes it.

    ``ResultStore(path)`` (or :meth:`writing`) may create and migrate the database;
    :meth:`reading` never changes anything on disk. ``path`` defaults to
    ``$KVMLAB_RESULTS``, else :func:`default_results_path`.
    """

    def __init__(self, path: Path | None = None, *, writable: bool = True) -> None:
        env = os.environ.get(RESULTS_ENV)
        own_dir = False
        if path is not None:
            shown = f"the results database {printable(str(path))}"
        elif env:
            path, shown = Path(env), printable(f"{RESULTS_ENV}={env}")
        else:  # kvmlab's own data directory: created (by a writing command), private
            path = default_results_path()
            shown = f"the results database {printable(str(path))}"
            own_dir = True
        self.path = path
        self.writable = writable
        self.file = printable(str(path))
        """The path as error lines show it (control characters escaped)."""
        self.missing: str | None = None
        """Why there are no results yet (``/x does not exist``), or None."""
        self._problems: list[str] = []
        self._more = 0
        self._seen: set[tuple[str, object]] = set()
        self._not_finite: dict[int, int] = {}
        self._db: sqlite3.Connection
        self._tables: frozenset[str]
        if own_dir and writable:
            check_place(path, shown)
            try:
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create {printable(str(path.parent))}: {exc.strerror}"
                ) from None
        exists = _check_path(path, shown)
        if not writable and not exists:
            self.missing = f"{self.file} does not exist"
            self._empty()
            return
        found = _identify(path, shown) if exists else _Found(0, frozenset())
        if not writable and not found.tables:
            self.missing = f"{self.file} is an empty SQLite database"
            self._empty()
            return
        if writable:
            self._open_writable(path, shown, exists)
            self._tables = frozenset(TABLE_COLUMNS)
        else:
            self._open_readonly(path)
            self._tables = found.tables

    @classmethod
    def reading(cls, path: Path | None = None) -> ResultStore:
        """The database as it is, read-only: nothing on disk is created or changed."""
        return cls(path, writable=False)

    @classmethod
    def writing(cls, path: Path | None = None) -> ResultStore:
        """The database to store runs in: created (0600) or migrated as needed."""
        return cls(path, writable=True)

    def _empty(self) -> None:
        """No database yet: reads find nothing (an in-memory one, never written to disk)."""
        self._db = sqlite3.connect(":memory:")
        self._db.executescript(_SCHEMA)
        self._tables = frozenset(TABLE_COLUMNS)

    def _open_readonly(self, path: Path) -> None:
        """``mode=ro``; where SQLite cannot keep its shared-memory file (a read-only
        directory or filesystem, where nobody writes either), as immutable."""
        for immutable in (False, True):
            db = None
            try:
                db = _connect(_uri(path, immutable), READ_TIMEOUT, uri=True)
                _distrust(db)
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as exc:
                if db is not None:
                    db.close()
                name = getattr(exc, "sqlite_errorname", "")
                if immutable or not name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
                    raise self._error(exc, "open") from None
                continue  # no -shm can be made here (a read-only place): nobody writes it
            self._db = db
            return

    def _open_writable(self, path: Path, shown: str, exists: bool) -> None:
        if not path.parent.is_dir():
            raise UsageError(
                f"{shown}: directory {printable(str(path.parent))} does not exist; "
                "create it first or choose another path"
            )
        for place in (path.parent, *([path] if exists else [])):
            if not os.access(place, os.W_OK):
                raise StoreError(
                    f"cannot store runs in {self.file}: {printable(str(place))} is not "
                    f"writable ({_denied(place)}); make it writable or name a database "
                    f"elsewhere with {RESULTS_ENV}"
                )
        if exists:
            _make_private(path)
        else:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                os.close(fd)
            except FileExistsError:
                raise UsageError(f"{shown} appeared while kvmlab created it; try again") from None
            except OSError as exc:
                raise StoreError(
                    f"cannot create the results database {self.file}: {exc.strerror}"
                ) from None
        try:
            self._db = _connect(path, WRITE_TIMEOUT)
        except sqlite3.Error as exc:
            _interrupted(exc)
            raise StoreError(f"cannot open the results database {self.file}: {exc}") from None
        try:
            _distrust(self._db)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            _interrupted(exc)
            raise StoreError(
                f"{self.file}: not a usable results database ({printable(str(exc))}); "
                "restore it from a backup or name another file"
            ) from None

    def _migrate(self) -> None:
        """Create what is missing (schemas 1 and 2 only lack tables added since), stamp
        the application id. The schema found was checked by :func:`_identify`."""
        with self._db:
            self._db.executescript(_SCHEMA)
            self._db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
            )
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _error(self, exc: sqlite3.Error, doing: str) -> StoreError:
        """A SQLite error as one line naming the file and what helps (a query a signal
        stopped raises :class:`KeyboardInterrupt` instead)."""
        _interrupted(exc)
        why = printable(str(exc))
        if "locked" in why or "busy" in why:
            fix = "another program holds it locked; try again when it is done"
        elif "readonly" in why or "read-only" in why:
            fix = "its file or directory is read-only; make it writable or name another file"
        elif "full" in why:
            fix = "the disk is full; free some space"
        else:
            fix = "restore it from a backup or name another file"
        return StoreError(f"cannot {doing} the results database {self.file}: {why}; {fix}")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if not self.writable:
            raise StoreError(f"{self.file} was opened read-only; nothing can be stored")
        try:
            with self._db:
                yield self._db
        except sqlite3.Error as exc:
            raise self._error(exc, "write to") from None

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """The rows of a query; a SQLite error is one :class:`StoreError` line."""
        try:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if "decode" not in str(exc):
                    raise
                self._db.text_factory = _lenient
                try:
                    return self._db.execute(sql, params).fetchall()
                finally:
                    self._db.text_factory = str
        except sqlite3.Error as exc:
            raise self._error(exc, "read") from None

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
            row = db.execute(
                f"SELECT {_bounded('host', valid.HOST_LIMIT)} FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise StoreError(f"{self.file}: run {run_id} is gone; its facts were not stored")
            try:
                host = {**valid.json_object("host", row[0], valid.HOST_LIMIT), **facts}
            except valid.Unreadable as exc:
                raise StoreError(self._bad(f"run {run_id}", str(exc), "runs", run_id)) from None
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

    @property
    def problems(self) -> list[str]:
        """One line per row read that is not what kvmlab wrote (left out), in the order
        met; beyond :data:`MAX_PROBLEMS`, one line saying how many more."""
        more = [f"{self.file}: {self._more} more unreadable row(s)"] if self._more else []
        return [*self._problems, *more]

    def check(self) -> None:
        """Raise :class:`UnreadableRows` when a row read was left out (after the command
        printed what it could read, so one bad row never hides the others)."""
        if self._problems:
            raise UnreadableRows(self.problems)

    def _bad(self, what: str, why: str, table: str, key: int, by: str = "id") -> str:
        return (
            f"{self.file}: {what}: {why}; it was changed outside kvmlab: correct the row "
            f"or delete it (DELETE FROM {table} WHERE {by} = {key})"
        )

    def _note(self, table: str, key: object, line: str) -> None:
        """Keep ``line`` about row ``key`` of ``table`` (once, however often it is read)."""
        if (table, key) in self._seen:
            return
        self._seen.add((table, key))
        if len(self._problems) < MAX_PROBLEMS:
            self._problems.append(line)
        else:
            self._more += 1

    def runs(self) -> list[Run]:
        """Every readable run, newest first (the others are named in :attr:`problems`)."""
        if "runs" not in self._tables:
            return []
        rows = self._rows(f"SELECT {_RUN_SELECT} FROM runs ORDER BY id DESC")
        failures = self._failures()
        out = []
        for row in rows:
            try:
                out.append(self._run(row, failures))
            except valid.Unreadable as exc:
                self._note("runs", row[0], self._run_problem(row, exc))
        return out

    def _run_problem(self, row: Sequence[Any], exc: valid.Unreadable) -> str:
        rowid, run_id = row[0], row[1]
        if isinstance(run_id, int) and not isinstance(run_id, bool) and run_id >= 1:
            return self._bad(f"run {run_id}", str(exc), "runs", run_id)
        return self._bad(f"runs row {rowid}", str(exc), "runs", rowid, "rowid")

    def run(self, ref: str | int) -> Run:
        """A run by id, or ``last`` for the newest."""
        if "runs" not in self._tables:
            raise UsageError(self._none_yet())
        if ref == "last" or ref == "--last":
            rows = self._rows(f"SELECT {_RUN_SELECT} FROM runs ORDER BY id DESC LIMIT 1")
            if not rows:
                raise UsageError(self._none_yet())
            run_id = rows[0][1]
        else:
            run_id = parse_run_id(ref)
            rows = []
            if run_id <= MAX_RUN_ID:  # SQLite's integers are 64-bit: a larger id is no run
                rows = self._rows(f"SELECT {_RUN_SELECT} FROM runs WHERE id = ?", (run_id,))
            if not rows:
                raise UsageError(
                    self._none_yet()
                    if self.missing
                    else f"no run {run_id} in {self.file} (kvmlab results ls lists the runs)"
                )
        try:
            key = run_id if isinstance(run_id, int) else None
            return self._run(rows[0], self._failures(key))
        except valid.Unreadable as exc:
            raise StoreError(self._run_problem(rows[0], exc)) from None

    def _none_yet(self) -> str:
        return f"no results yet ({self.missing})" if self.missing else f"no runs in {self.file} yet"

    def _run(self, row: Sequence[Any], failures: dict[int, list[Failure]]) -> Run:
        _, run_id, lab, lab_file, digest, suite, version, host, started, ended, complete = row
        run_id = valid.integer("id", run_id, 1, MAX_RUN_ID)
        return Run(
            id=run_id,
            lab=valid.text("lab", lab),
            lab_file=valid.text("lab_file", lab_file),
            spec_digest=valid.text("spec_digest", digest),
            suite=valid.text("suite", suite),
            kvmlab_version=valid.text("kvmlab_version", version),
            started=valid.moment("started", started),
            ended=None if ended is None else valid.moment("ended", ended),
            complete=valid.flag("complete", complete),
            host=valid.json_object("host", host, valid.HOST_LIMIT),
            failures=failures.get(run_id, []),
        )

    def _failures(self, run_id: int | None = None) -> dict[int, list[Failure]]:
        """Run id -> its readable failures in the order they were recorded (of one run,
        or all)."""
        if "failures" not in self._tables:
            return {}
        where = "" if run_id is None else "WHERE run = ?"
        rows = self._rows(
            f"SELECT {_FAILURE_SELECT} FROM failures {where} ORDER BY rowid",
            () if run_id is None else (run_id,),
        )
        out: dict[int, list[Failure]] = {}
        for row in rows:
            rowid, run = row[0], row[1]
            try:
                failure = _failure(row)
            except valid.Unreadable as exc:
                what = f"run {valid.shown(run)}, failure row {rowid}"
                self._note("failures", rowid, self._bad(what, str(exc), "failures", rowid, "rowid"))
                continue
            if isinstance(run, int) and not isinstance(run, bool):
                out.setdefault(run, []).append(failure)
        return out

    def samples(self, run_id: int) -> list[Sample]:
        """The readable samples of a run in measurement order (see :meth:`iter_samples`)."""
        return list(self.iter_samples(run_id))

    def iter_samples(self, run_id: int) -> Iterator[Sample]:
        """The readable samples of a run in measurement order, read :data:`PAGE` rows at a
        time (a run of millions never sits whole in memory). A value that is not a finite
        number (stored by an older kvmlab, or outside it) is no measurement: it is left out
        and counted in :meth:`left_out`; any other row that is not what kvmlab wrote is left
        out and named in :attr:`problems`."""
        self._not_finite[run_id] = 0
        if "samples" not in self._tables:
            return
        select = f"SELECT {_SAMPLE_SELECT} FROM samples WHERE run = ?"
        order = f"ORDER BY rowid LIMIT {PAGE}"
        rows = self._rows(f"{select} {order}", (run_id,))
        while rows:
            yield from self._page(run_id, rows)
            if len(rows) < PAGE:
                return
            rows = self._rows(f"{select} AND rowid > ? {order}", (run_id, rows[-1][0]))

    def _page(self, run_id: int, rows: list[Any]) -> list[Sample]:
        """The samples of one page of rows (validated; a value not finite counted)."""
        out: list[Sample] = []
        limit, long_limit, reps = valid.NAME_LIMIT, valid.TEXT_LIMIT, MAX_REPETITION
        for row in rows:
            _, variant, guest, level, accel, workload, metric, value, unit, hib, rep, command = row
            if (  # the common case, checked inline: 200,000 rows in well under a second
                type(value) is float
                and math.isfinite(value)
                and type(variant) is str
                and type(guest) is str
                and type(accel) is str
                and type(workload) is str
                and type(metric) is str
                and type(unit) is str
                and type(command) is str
                and type(level) is str
                and type(hib) is int
                and type(rep) is int
                and (hib == 0 or hib == 1)
                and 0 <= rep <= reps
                and level in LEVELS_READ
                and max(len(variant), len(guest), len(accel), len(workload), len(metric)) <= limit
                and len(unit) <= limit
                and len(command) <= long_limit
            ):
                out.append(
                    Sample(
                        variant,
                        guest,
                        level,
                        accel,
                        workload,
                        metric,
                        value,
                        unit,
                        hib == 1,
                        rep,
                        command,
                    )
                )
                continue
            if isinstance(value, float) and not math.isfinite(value):
                self._not_finite[run_id] += 1
                continue
            try:
                out.append(_sample(row))
            except valid.Unreadable as exc:
                what = f"run {run_id}, sample row {row[0]}"
                self._note("samples", row[0], self._bad(what, str(exc), "samples", row[0], "rowid"))
        return out

    def documents(self, run_id: int, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """(variant, document) of one kind, in the order they were stored; one that is not
        what kvmlab wrote is left out and named in :attr:`problems`."""
        if "documents" not in self._tables:
            return []
        rows = self._rows(
            f"SELECT rowid, {_bounded('variant', valid.NAME_LIMIT)}, "
            f"{_bounded('body', valid.DOCUMENT_LIMIT)} FROM documents "
            "WHERE run = ? AND kind = ? ORDER BY rowid",
            (run_id, kind),
        )
        out = []
        for rowid, variant, body in rows:
            try:
                out.append((valid.text("variant", variant), valid.document("body", kind, body)))
            except valid.Unreadable as exc:
                what = f"run {run_id}, document row {rowid} ({printable(kind)})"
                self._note(
                    "documents", rowid, self._bad(what, str(exc), "documents", rowid, "rowid")
                )
        return out

    def left_out(self, run_id: int) -> int:
        """How many stored values of the run were left out, the last time its samples were
        read, as not finite numbers (``inf``, ``-inf``)."""
        return self._not_finite.get(run_id, 0)

    def sample_counts(self) -> dict[int, int]:
        """Run id -> number of samples stored that are numbers a report can use (a value
        that is not finite is left out, as :meth:`samples` does), for every run with
        samples."""
        return {run: usable for run, (usable, _) in self.counts().items() if usable}

    def not_finite_counts(self) -> dict[int, int]:
        """Run id -> number of stored values that are not finite numbers (left out of
        reports), for every run with any."""
        return {run: bad for run, (_, bad) in self.counts().items() if bad}

    def counts(self) -> dict[int, tuple[int, int]]:
        """Run id -> (samples a report can use, values left out as not finite numbers),
        for every run with samples (one pass over the samples)."""
        if "samples" not in self._tables:
            return {}
        rows = self._rows(
            "SELECT run, COUNT(*), TOTAL(typeof(value) = 'real' AND value IN (1e999, -1e999)) "
            "FROM samples GROUP BY run"
        )
        return {r[0]: (int(r[1]) - int(r[2]), int(r[2])) for r in rows if isinstance(r[0], int)}

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def parse_run_id(ref: str | int) -> int:
    """A run id: a positive whole number in ASCII digits (any size; none is negative)."""
    if isinstance(ref, int):
        return ref
    if not (ref.isascii() and ref.isdigit()) or len(ref) > 100 or int(ref) == 0:
        shown = ref if len(ref) <= 40 else ref[:37] + "..."
        raise UsageError(f"{printable(repr(shown))} is not a run id (see kvmlab results ls)")
    return int(ref)


def _failure(row: Sequence[Any]) -> Failure:
    _, run, variant, level, guest, stage, message, exit_code, detail = row
    valid.integer("run", run, 1, MAX_RUN_ID)
    if level != "":
        valid.text("level", level)
        if level not in LEVELS_READ:
            raise valid.Unreadable(f"level is {valid.shown(level)}, not L0, L1, L2, ...")
    return Failure(
        valid.text("variant", variant),
        level,
        valid.text("guest", guest),
        valid.text("stage", stage),
        valid.text("message", message, valid.TEXT_LIMIT),
        None if exit_code is None else valid.integer("exit_code", exit_code, -(1 << 31), 1 << 31),
        valid.text("detail", detail, valid.DETAIL_LIMIT),
    )


def _sample(row: Sequence[Any]) -> Sample:
    """A sample row that failed the quick check: which field is wrong (Unreadable)."""
    _, variant, guest, level, accel, workload, metric, value, unit, hib, rep, command = row
    valid.text("level", level)
    if level not in LEVELS_READ:
        raise valid.Unreadable(f"level is {valid.shown(level)}, not L0, L1, L2, ...")
    return Sample(
        valid.text("variant", variant),
        valid.text("guest", guest),
        level,
        valid.text("accel", accel),
        valid.text("workload", workload),
        valid.text("metric", metric),
        valid.number("value", value),
        valid.text("unit", unit),
        valid.flag("higher_is_better", hib),
        valid.integer("repetition", rep, 0, MAX_REPETITION),
        valid.text("command", command, valid.TEXT_LIMIT),
    )
