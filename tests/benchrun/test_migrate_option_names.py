"""``kvmlab migrate LAB``'s errors name the option the user typed: a bad ``--out`` path is
refused as ``--out``, before the lab is loaded or anything boots; an older kvmlab's
spellings (``--lab``, ``--html``, ``--auto``) are told the one spelling now."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
LAB = Path(__file__).resolve().parents[2] / "labs" / "migrate.toml"


def kvmlab(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


@pytest.mark.parametrize("lab", [str(LAB), "migrate"])
def test_a_bad_out_path_is_refused_as_out(lab: str, tmp_path: Path) -> None:
    page = tmp_path / "missing" / "m.html"
    proc = kvmlab(tmp_path, "migrate", lab, "--out", str(page))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: --out {page}: directory {page.parent} does not exist; create it first\n"
    )
    (tmp_path / "dir").mkdir()
    proc = kvmlab(tmp_path, "migrate", lab, "--out", str(tmp_path / "dir"))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"kvmlab: --out {tmp_path / 'dir'} is a directory; ")
    assert not (tmp_path / "run").exists(), "refused before anything started"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--lab", str(LAB)], f"give the lab as the argument: kvmlab migrate {LAB}"),
        (["migrate", "--html", "x.html"], "the HTML page is --out FILE"),
        (["migrate/vm", "--auto"], "the automatic choice is a mode: --mode auto"),
        (["migrate/vm", "--mode", "fast"], "unknown migration mode 'fast'"),
        (["migrate/vm", "--out", "x.html"], "--variant, --reps and --out go with a LAB"),
    ],
)
def test_older_spellings_are_told_the_one_spelling(
    args: list[str], said: str, tmp_path: Path
) -> None:
    proc = kvmlab(tmp_path, "migrate", *args)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
