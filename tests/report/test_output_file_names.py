"""``--out`` takes any name the filesystem takes, and refuses the others in one line (issue
39, item 5): a 300-character name, a file where a directory should be, a pipe nobody reads,
the results database itself. The installed command runs as a user would; nothing boots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.results.model import Run, Sample
from kvmlab.results.store import ResultStore

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
NAME_MAX = os.pathconf("/tmp", "PC_NAME_MAX")


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RESULTS": str(db), "KVMLAB_RUN_DIR": str(db.parent / "run")}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
        sample = Sample("default", "host", "L0", "native", "cpu", "e", 1.0, "u", True, 0, "c")
        store.add(run, [sample])
        store.finish(run)
    return path


COMMANDS = {
    "report": ("report", "1", "-o", "html", "--out"),
    "export": ("results", "export", "1", "--out"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("length", [NAME_MAX - 5, NAME_MAX])
def test_any_name_the_filesystem_takes_is_written(
    command: str, length: int, db: Path, tmp_path: Path
) -> None:
    out = tmp_path / ("x" * (length - 5) + ".html")
    proc = kvmlab(db, *COMMANDS[command], str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_name_too_long_is_one_line(command: str, db: Path, tmp_path: Path) -> None:
    for out in (tmp_path / ("x" * 300 + ".html"), tmp_path / ("y" * 300) / "r.html"):
        proc = kvmlab(db, *COMMANDS[command], str(out))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == [
            f"kvmlab: --out {out}: a name in it is longer than the filesystem allows; "
            "give a shorter name"
        ]


def test_a_file_where_a_directory_should_be_is_one_line(db: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "r.csv"
    proc = kvmlab(db, "results", "export", "1", "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr == f"kvmlab: --out {out}: a part of it is a file, not a directory\n"


def test_a_pipe_nobody_reads_is_one_line_not_a_hang(db: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = kvmlab(db, "results", "export", "1", "--out", str(fifo))
    assert proc.returncode == 3
    assert proc.stderr == (
        f"kvmlab: cannot write --out {fifo}: nothing is reading that pipe; start its reader first\n"
    )


@pytest.mark.parametrize("end", ["", "-wal", "-shm", "-journal"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_results_database_is_never_written_over(
    command: str, end: str, db: Path, tmp_path: Path
) -> None:
    before = db.read_bytes()
    out = db.with_name(db.name + end)
    proc = kvmlab(db, *COMMANDS[command], str(out))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"kvmlab: --out {out} is the results database kvmlab reads; give another file name\n"
    )
    assert db.read_bytes() == before
