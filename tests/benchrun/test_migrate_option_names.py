"""``kvmlab migrate --lab``'s errors name the option the user typed (issue 39, item 6): a bad
``--html`` path is refused as ``--html``, before the lab is loaded or anything boots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_a_bad_html_path_is_refused_as_html(tmp_path: Path) -> None:
    page = tmp_path / "missing" / "m.html"
    proc = kvmlab(tmp_path, "migrate", "--lab", str(LAB), "--html", str(page))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: --html {page}: directory {page.parent} does not exist; create it first\n"
    )
    (tmp_path / "dir").mkdir()
    proc = kvmlab(tmp_path, "migrate", "--lab", str(LAB), "--html", str(tmp_path / "dir"))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"kvmlab: --html {tmp_path / 'dir'} is a directory; ")
    assert not (tmp_path / "run").exists(), "refused before anything started"
