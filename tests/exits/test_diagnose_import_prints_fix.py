"""``kvmlab diagnose --import`` of a recorded perf report (the README's import example)
prints its whole report, its fix included, with a placeholder for the guest's name.
Nothing boots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"
KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def kvmlab(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def test_diagnose_import_text_prints_the_fix_with_a_placeholder_guest() -> None:
    profile = DATA / "perf-kvm-stat-report-timer-storm-l2.txt"
    proc = kvmlab("diagnose", "--import", str(profile), "--seconds", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "fix in the lab file (GUEST: the guest's name in your lab):" in proc.stdout
    assert "[variants.fix-" in proc.stdout and ".guests.GUEST" in proc.stdout
