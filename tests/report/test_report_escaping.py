"""Names from the results database never reach a terminal as control sequences, nor a
Markdown table as its syntax, nor a spreadsheet as a formula: every
output of ``report``, ``results ls`` and ``results export`` with a lab,
guest, workload, metric and unit made of escapes, HTML, ``|`` and formula starts. The
installed command runs as a user would; nothing boots."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvmlab.results.model import Failure, Run, Sample
from kvmlab.results.store import ResultStore

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
ESC = "\x1b]0;pwned\x07\x1b[2J\x9b1m\u202e"
"""An OSC title, a bell, clear-screen, a C1 CSI, a right-to-left override."""
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "COLUMNS": "300",
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


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Run 1 of lab ``lab<ESC>`` in a directory whose name holds an escape too: a guest
    ``<script>...``, a workload and metric with ``|`` and escapes, a command ``=calc``."""
    home = tmp_path / "esc\x1b[31mdir"
    home.mkdir()
    path = home / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start(Run(0, f"lab{ESC}", "/labs/x.toml", "d", "quick", "0", time.time()))
        rows = []
        for guest, level in (("host", "L0"), (f"<script>alert(1)</script>{ESC}", "L1")):
            for rep in range(2):
                cpu = ("cpu" + ESC, "a|b" + ESC, 100.0 + rep, "u|<b>", True, rep, "=cmd|calc")
                disk = ("disk", "-x", 50.0 + rep, "@u", True, rep, "+cmd")
                rows += [Sample("default", guest, level, "tcg", *cpu)]
                rows += [Sample("default", guest, level, "tcg", *disk)]
        store.add(run, rows)
        store.add_failure(run, Failure("default", "L2", "l1/l2", "boot", f"boom{ESC}", 3, ESC))
        store.finish(run, complete=False)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("results", "ls"),
        ("results", "ls", "-o", "json"),
        ("report", "1", "-o", "md"),
        ("report", "1"),
        ("report", "1", "-o", "md"),
        ("report", "1", "-o", "html"),
        ("report", "1", "-o", "json"),
        ("results", "export", "1"),
        ("results", "export", "1", "-o", "json"),
        ("report", "9"),
    ],
    ids=" ".join,
)
def test_no_control_character_reaches_the_terminal(args: tuple[str, ...], db: Path) -> None:
    proc = kvmlab(db, *args)
    assert proc.returncode == (2 if args == ("report", "9") else 0), proc.stderr
    assert not CONTROLS.search(proc.stdout), CONTROLS.findall(proc.stdout)
    assert not CONTROLS.search(proc.stderr), CONTROLS.findall(proc.stderr)
    assert "\\x1b" in proc.stdout + proc.stderr or "\\u001b" in proc.stdout


def test_markdown_escapes_table_syntax_and_html(db: Path) -> None:
    md = kvmlab(db, "report", "1", "-o", "md").stdout
    assert "<script>" not in md and "\\<script\\>alert(1)\\</script\\>" in md
    assert "a\\|b\\\\x1b\\]0;pwned" in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    cells = {len(re.split(r"(?<!\\)\|", line)) for line in table}
    assert cells == {2 + 3 + 3}, "every row has its 3 + 3 cells, no more: | is escaped"
    assert "u\\|\\<b\\> (higher is better)" in md


def test_csv_keeps_values_but_neutralises_controls_and_formulas(db: Path) -> None:
    proc = kvmlab(db, "results", "export", "1")
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 8
    first = rows[0]
    assert first["workload"] == "cpu\\x1b]0;pwned\\x07\\x1b[2J\\x9b1m\\u202e"
    assert first["metric"].startswith("a|b\\x1b]0;")
    assert first["command"] == "'=cmd|calc", "a formula to a spreadsheet, shown as text"
    assert first["value"] == "100.0" and first["repetition"] == "0", "numbers as they are"
    disk = rows[1]
    assert (disk["metric"], disk["unit"], disk["command"]) == ("'-x", "'@u", "'+cmd")
    escaped = first["workload"].removeprefix("cpu")
    assert {r["guest"] for r in rows} == {"host", "<script>alert(1)</script>" + escaped}


def test_json_export_keeps_every_value_as_stored(db: Path) -> None:
    proc = kvmlab(db, "results", "export", "1", "-o", "json")
    doc = json.loads(proc.stdout)
    assert doc["run"]["lab"] == f"lab{ESC}"
    assert doc["samples"][0]["command"] == "=cmd|calc"
    assert "\\u001b" in proc.stdout


def test_html_to_a_terminal_is_well_formed_and_escaped(db: Path) -> None:
    page = kvmlab(db, "report", "1", "-o", "html").stdout
    ET.fromstring(page.split("\n", 1)[1])  # well-formed: no control character in it
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_results_ls_escapes_its_path_and_names(db: Path) -> None:
    out = kvmlab(db, "results", "ls").stdout
    shown = str(db).replace("\x1b", "\\x1b")
    assert out.splitlines()[0] == f"runs in {shown}"
    assert "lab\\x1b]0;pwned\\x07\\x1b[2J\\x9b1m\\u202e" in out


def test_a_netcompare_run_prints_its_title_and_notes_escaped(tmp_path: Path) -> None:
    """A run of netcompare alone prints its title on a line of its own, then netcompare's
    tables and the notes its document keeps (left-out paths, findings)."""
    home = tmp_path / "home"
    home.mkdir()
    db = home / "r.sqlite"
    with ResultStore(db) as store:
        run = store.start(Run(0, f"lab{ESC}", "/x", "d", "quick", "0", time.time()))
        store.add(
            run,
            [
                Sample(
                    "default",
                    "vm",
                    "L1",
                    "tcg",
                    "netcompare",
                    f"p{ESC}: tcp",
                    1.0,
                    "G",
                    True,
                    0,
                    "",
                )
            ],
        )
        store.add_document(run, "default", "netcompare", {"left_out": [f"x{ESC}: no vhost"]})
        store.finish(run)
    proc = kvmlab(db, "report", "1")
    assert proc.returncode == 0, proc.stderr
    assert not CONTROLS.search(proc.stdout), CONTROLS.findall(proc.stdout)
    assert proc.stdout.startswith("kvmlab run 1: lab lab\\x1b]0;pwned")
    assert "left out x\\x1b]0;pwned" in proc.stdout
