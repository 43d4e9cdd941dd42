"""A run id of any size, or one that is not a run id at all, is one line from ``report``
and ``results``, never a traceback. The installed command runs as a user would."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.results.results_cli import db, kvmlab

__all__ = ["db"]  # the one-run database fixture

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
    assert proc.stderr.splitlines() == [
        f"kvmlab: no run {HUGE_ID} in {db} (kvmlab results ls lists the runs)"
    ]


@pytest.mark.parametrize("ref", ["-1", "0", "1.0", "٣", " 1", "1e3"])
def test_odd_run_ids_are_refused(ref: str, db: Path) -> None:
    proc = kvmlab(db, "report", ref)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kvmlab: ")
    assert "is not a run id" in line or "no run" in line or "No such option" in line
