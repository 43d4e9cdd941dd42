"""``--out`` of ``kvmlab report`` and ``kvmlab results export`` never writes through a
link: a symbolic link is refused, a hard link's other name is left as it was, and a new
file gets the usual mode. The installed command runs as a user would; nothing boots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.results.results_cli import db, kvmlab

__all__ = ["db"]  # the one-run database fixture

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
