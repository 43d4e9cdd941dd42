"""``kvmlab report`` and ``kvmlab results`` against hostile input (issue 28, items 3 and 4):
output files never written through a link, run ids of any size, stored values that are
not finite. The installed command runs as a user would; nothing boots."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.results.model import Run, Sample
from kvmlab.results.store import ResultStore

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RESULTS": str(db), "COLUMNS": "200"}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def sample(level: str, value: float, rep: int, metric: str = "events") -> Sample:
    guest = "host" if level == "L0" else "vm"
    accel = "native" if level == "L0" else "tcg"
    return Sample(
        "default",
        guest,
        level,
        accel,
        "cpu",
        metric,
        value,
        "events/s",
        True,
        rep,
        "sysbench cpu run",
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
        store.add(
            run,
            [
                sample(level, v, i)
                for level in ("L0", "L1")
                for i, v in enumerate((100.0, 110.0, 105.0))
            ],
        )
        store.finish(run)
    return path


OUT_COMMANDS = {
    "report": ("report", "1", "-o", "html", "--out"),
    "export": ("results", "export", "1", "--out"),
}


@pytest.mark.parametrize("command", sorted(OUT_COMMANDS))
def test_out_never_writes_through_a_symlink(command: str, db: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "out.html"
    link.symlink_to(victim)
    proc = kvmlab(db, *OUT_COMMANDS[command], str(link))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"kvmlab: --out {link} is a symbolic link; kvmlab does not write "
        "through links: give the file itself, or a new name\n"
    )
    assert victim.read_text() == "precious\n"
    assert link.is_symlink()


@pytest.mark.parametrize("command", sorted(OUT_COMMANDS))
def test_out_replaces_a_hard_link_not_its_other_name(
    command: str, db: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out.html"
    os.link(victim, out)
    proc = kvmlab(db, *OUT_COMMANDS[command], str(out))
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "precious\n"
    assert out.read_text() != "precious\n" and not out.samefile(victim)
    # no temporary file is left (reading kvmlab's own WAL database may leave its -wal/-shm)
    names = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("r.sqlite-"))
    assert names == ["out.html", "r.sqlite", "victim.txt"]


def test_out_to_a_new_file_gets_the_usual_mode(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "new.csv"
    assert kvmlab(db, "results", "export", "1", "--out", str(out)).returncode == 0
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    assert "events" in out.read_text()


HUGE_ID = "99999999999999999999999"
ID_COMMANDS = {
    "report": ("report", HUGE_ID),
    "show": ("report", HUGE_ID, "-o", "md"),
    "export": ("results", "export", HUGE_ID),
    "compare": ("report", "1", "--compare", HUGE_ID),
}


@pytest.mark.parametrize("command", sorted(ID_COMMANDS))
def test_a_run_id_of_any_size_is_one_line(command: str, db: Path) -> None:
    proc = kvmlab(db, *ID_COMMANDS[command])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"kvmlab: no run {HUGE_ID} in {db}"]


@pytest.mark.parametrize("ref", ["-1", "0", "1.0", "٣", " 1", "1e3"])
def test_odd_run_ids_are_refused(ref: str, db: Path) -> None:
    proc = kvmlab(db, "report", ref)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kvmlab: ")
    assert "is not a run id" in line or "no run" in line or "No such option" in line


def test_non_finite_values_are_never_stored(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
        store.add(run, [sample("L0", math.inf, 0), sample("L0", math.nan, 1), sample("L0", 5.0, 2)])
        assert [s.value for s in store.samples(run)] == [5.0]
        (failure,) = store.run(run).failures
        assert "2 value(s) that are not finite numbers" in failure.message


def poison(db: Path, value: float) -> None:
    """A stored value as an older kvmlab (or a hand) could leave it."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE samples SET value = ? WHERE rowid = 1", (value,))


@pytest.mark.parametrize("value", [math.inf, -math.inf, 1e308, -1e308])
@pytest.mark.parametrize("output", ["text", "json", "md", "html"])
def test_whatever_is_stored_reports(value: float, output: str, db: Path) -> None:
    poison(db, value)
    proc = kvmlab(db, "report", "1", "-o", output)
    assert proc.returncode == 0, proc.stderr
    if output == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))


@pytest.mark.parametrize("depth", [0, 1])
def test_a_database_below_a_directory_open_to_all_is_refused(depth: int, tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    db = open_dir / "sub" / "r.sqlite" if depth else open_dir / "r.sqlite"
    db.parent.mkdir(exist_ok=True)
    proc = kvmlab(db, "results", "ls")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"kvmlab: KVMLAB_RESULTS={db}: {open_dir} is writable by others (mode 777) without the "
        "sticky bit; put the results database in a directory of your own"
    ]
    assert not db.exists()


def test_a_database_below_a_sticky_directory_is_taken(tmp_path: Path) -> None:
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    proc = kvmlab(sticky / "r.sqlite", "results", "ls")
    assert proc.returncode == 0, proc.stderr


def test_terminal_escapes_in_table_values_are_printed_escaped() -> None:
    """A value from the database (a lab name, a guest, an imported reason) never reaches
    the terminal as an escape sequence: tables print it escaped, line breaks kept."""
    import io

    from rich.console import Console
    from rich.text import Text

    from kvmlab.report.grid import Col, print_grid

    out = io.StringIO()
    print_grid(
        Console(file=out, width=200),
        [Col("lab"), Col("note")],
        [["x\x1b[2Jy", Text("a\x07b")], ["two\nlines", "ok"]],
        title="runs \x1b]0;pwned\x07",
    )
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "x\\x1b[2Jy" in text and "runs \\x1b]0;pwned\\x07" in text
    assert "two lines" in text
