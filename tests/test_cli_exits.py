"""The installed command's failures a user can cause: one line, the README's exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvmlab.cli.main import app
from kvmlab.errors import KvmlabError
from kvmlab.results.model import Run
from kvmlab.results.store import ResultStore
from tests.conftest import LABS, ROOT
from tests.fakeguest import running_guest

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
INTEL = str(ROOT / "tests" / "host" / "fixtures" / "intel-nested-off")


def kvmlab(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the console script with stdout and stderr piped (not terminals)."""
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "60", **env},
    )


def in_process(status: int, *args: str) -> str:
    """The kvmlab error a command raises (``main`` prints it as one line), checked for
    its exit status."""
    error = CliRunner().invoke(app, list(args)).exception
    assert isinstance(error, KvmlabError), error
    assert error.exit_code == status and len(error.lines()) == 1
    return error.lines()[0]


def one_line(proc: subprocess.CompletedProcess[str], status: int) -> str:
    assert proc.returncode == status, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kvmlab: ")
    return line.removeprefix("kvmlab: ")


@pytest.mark.parametrize("args", [["doctor", "--root", INTEL], ["check", "--explain", "-o", "md"]])
def test_closed_pipe_ends_quietly_with_141(args: list[str]) -> None:
    proc = subprocess.Popen([KVMLAB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert err == b""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["ps", "-o", "yaml"],
            "Invalid value for --output: choose text or json (got 'yaml') (see 'kvmlab ps --help')",
        ),
        (["report", "--bogus"], "No such option: --bogus"),
    ],
)
def test_usage_errors_are_one_line_when_piped(args: list[str], expected: str) -> None:
    assert expected in one_line(kvmlab(*args), 2)


def test_files_that_are_not_labs_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    proc = kvmlab("check", "/dev/null", str(fifo), str(tmp_path))  # /dev/zero is refused alike
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "kvmlab: /dev/null: is a character device, not a lab file; a lab file is a regular "
        "TOML file",
        f"kvmlab: {fifo}: is a named pipe, not a lab file; a lab file is a regular TOML file",
        f"kvmlab: {tmp_path}: is a directory, not a lab file",
    ]


def test_report_out_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "r.sqlite"))
    assert in_process(2, "report", "--out", str(tmp_path)) == (
        f"--out {tmp_path} is a directory; give a file name, e.g. {tmp_path}/report.html"
    )
    missing = tmp_path / "missing" / "r.html"
    assert in_process(2, "report", "--out", str(missing)) == (
        f"--out {missing}: directory {missing.parent} does not exist; create it first"
    )
    assert not missing.parent.exists()
    assert in_process(2, "results", "export", "--out", "/missing/x.csv") == (
        "--out /missing/x.csv: directory /missing does not exist; create it first"
    )


def test_write_failure_is_exit_3(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.finish(store.start(Run(0, "x", "x.toml", "d", "quick", "0", time.time())))
    for args in (["report", "--out", "/dev/full"], ["results", "export", "--out", "/dev/full"]):
        line = one_line(kvmlab(*args, KVMLAB_RESULTS=str(db)), 3)
        assert line == "cannot write --out /dev/full: No space left on device"


def test_kvmlab_results_is_the_database_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path))
    assert in_process(2, "results", "ls") == (
        f"KVMLAB_RESULTS={tmp_path} is a directory; it names the results database file, "
        f"e.g. {tmp_path}/results.sqlite"
    )
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("KVMLAB_RESULTS", str(db))
    listed = CliRunner().invoke(app, ["results", "ls"])
    assert listed.exit_code == 0
    assert f"no results yet ({db} does not exist)" in listed.output
    assert not db.exists(), "a reading command creates nothing"


def test_bench_refuses_levels_the_lab_lacks_before_anything_runs(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    proc = kvmlab("bench", str(LABS / "basic.toml"), "--levels", "L0,L2", KVMLAB_RESULTS=str(db))
    assert "cannot be measured at L2" in one_line(proc, 2)
    assert proc.stdout == "" and not db.exists(), "nothing measured, nothing stored"


def test_bench_refuses_a_lab_that_is_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("KVMLAB_RESULTS", str(db))
    with running_guest("basic"):
        line = in_process(2, "bench", str(LABS / "basic.toml"), "--levels", "L0")
    assert line == "lab basic is already up (basic/vm1 running); run 'kvmlab down basic' first"
    assert not db.exists(), "nothing measured, nothing stored"
