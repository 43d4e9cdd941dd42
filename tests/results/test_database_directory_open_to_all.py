"""A results database below a directory anyone may write to (without the sticky bit) is
refused before it is created; below a sticky directory it is taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.results.results_cli import kvmlab


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
