"""The README's ``kvmlab import`` as a user runs it: a domain's XML file becomes a lab file
that ``kvmlab check`` accepts; what it cannot say is on stderr; nothing is overwritten."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import KVMLAB
from tests.readme import readme_line

DATA = Path(__file__).parent / "data" / "import"


def _kvmlab(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RUN_DIR": str(cwd / "run")}
    return subprocess.run(
        [KVMLAB, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_the_readme_import_writes_a_lab_check_accepts(tmp_path: Path) -> None:
    args = readme_line("kvmlab import")
    xml = tmp_path / args[1]
    shutil.copy(DATA / "windows-clock.xml", xml)
    made = _kvmlab(tmp_path, *args)
    assert made.returncode == 0, made.stderr
    lab = tmp_path / args[args.index("--out") + 1]
    assert "[guests.win10.clock]" in lab.read_text()
    assert "kvmlab: import: not carried over: graphics" in made.stderr
    assert f"wrote {lab.name}: lab win10; kvmlab check {lab.name}" in made.stderr
    checked = _kvmlab(tmp_path, "check", str(lab))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    again = _kvmlab(tmp_path, *args)
    assert again.returncode == 2 and "overwrites nothing" in again.stderr


def test_a_command_line_on_stdin_and_refusals_in_one_line(tmp_path: Path) -> None:
    argv = (DATA / "nested-l1.argv").read_text()
    done = subprocess.run(
        [KVMLAB, "import", "-"], input=argv, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert 'name = "centos7"' in done.stdout
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args, words in (
        ([str(fifo)], "is not a file"),
        ([str(tmp_path / "missing.xml")], "cannot be read"),
        (["pid:abc"], "no QEMU runs as that pid"),
        ([""], "names no VM"),
        (["domain:"], "names no VM"),
        (["x.xml", "-c", "qemu:///system"], "-c/--connect goes with domain:NAME"),
    ):
        refused = _kvmlab(tmp_path, "import", *args)
        assert refused.returncode == 2, refused.stderr
        assert words in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
