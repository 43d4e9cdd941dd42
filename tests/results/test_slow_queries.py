"""A query that takes long (a crafted or a huge database) never makes kvmlab unkillable:
every connection has a progress handler, so Ctrl-C or SIGTERM stops the query in SQLite,
and the ``interrupted`` SQLite ends it with is raised as KeyboardInterrupt (the CLI exits
130), not reported as a damaged database. Run in a child process: a signal that went
unheard must not hang the test run (the child is killed after a timeout)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.results import store as store_module
from kvmlab.results.model import Run
from kvmlab.results.store import ResultStore

FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"

CHILD = """
import signal, sys
from pathlib import Path
from kvmlab.results.store import ResultStore

def interrupt(signum, frame):  # as the CLI does (kvmlab.proc.signals): SIGTERM like Ctrl-C
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, interrupt)
signal.signal(signal.SIGINT, interrupt)
with ResultStore.reading(Path(sys.argv[1])) as store:
    print("querying", flush=True)
    try:
        store._rows(sys.argv[2])
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(130)
print("the query ended", flush=True)
"""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    with ResultStore.writing(path) as store:
        store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
    return path


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_query_that_never_ends(signum: int, db: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), FOREVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "querying\n"
        time.sleep(0.5)  # well into the query
        start = time.monotonic()
        child.send_signal(signum)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert time.monotonic() - start < 5, "the query went on after the signal"
    assert (child.returncode, out, err) == (130, "KeyboardInterrupt\n", "")


def test_interrupted_is_an_interrupt_not_a_damaged_database(db: Path) -> None:
    """What SQLite says of a query the progress handler stopped is raised as Ctrl-C."""
    with ResultStore.reading(db) as store:
        calls = 0

        def stop() -> int:
            nonlocal calls
            calls += 1
            raise KeyboardInterrupt  # as a signal's handler does, inside the callback

        store._db.set_progress_handler(stop, 1)
        with pytest.raises(KeyboardInterrupt):
            store.runs()
        with pytest.raises(KeyboardInterrupt):
            store._rows(FOREVER)
        assert calls >= 2


def test_every_connection_has_the_progress_handler(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[sqlite3.Connection] = []
    connect = store_module._connect

    def watched(target: str | Path, timeout: float, uri: bool = False) -> sqlite3.Connection:
        made.append(connection := connect(target, timeout, uri))
        return connection

    monkeypatch.setattr(store_module, "_connect", watched)
    monkeypatch.setattr(store_module, "PROGRESS_STEPS", 1)
    ticks = 0

    def tick() -> int:
        nonlocal ticks
        ticks += 1
        return 0

    monkeypatch.setattr(store_module, "_tick", tick)
    with ResultStore.reading(db) as store:
        store.runs()
    with ResultStore.writing(db) as store:
        store.runs()
    assert len(made) == 4, "identify, then read; identify, then write"
    assert ticks > 0
