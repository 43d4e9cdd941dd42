"""The benchmarks the README names still run: each one's ``--help``, and one short round.

Nothing else imports ``benchmarks/``, so a change in the package can break them unseen (one
did: ``boot.py`` imported a function a tidy-up removed). Every script's ``--help`` runs here
(it imports everything the script uses); the boot benchmark's short round too, functional
as it boots a guest. ``soak.py``'s round boots the nested lab and loads L2 for minutes: the
main-job test puts the same disk and network load on L2, so only its ``--help`` runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.runtime.conftest import qemu_pids

SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
SMOKE = {
    "startup.py": ["--runs", "1"],
    "boot.py": ["--smoke"],
    "soak.py": ["--smoke"],
    "l2_tcg.py": ["--smoke"],
    "exits_overhead.py": ["--smoke"],
}
"""Each benchmark's quickest run."""


def bench(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_benchmark_has_a_smoke_run() -> None:
    assert {p.name for p in SCRIPTS} == set(SMOKE)


@pytest.mark.parametrize("script", [p.name for p in SCRIPTS])
def test_help(script: str) -> None:
    """``--help`` imports everything the script uses and parses its options."""
    proc = bench(script, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {script}")
    for option in SMOKE[script]:
        if option.startswith("--"):
            assert option in proc.stdout


def test_startup_one_round() -> None:
    proc = bench("startup.py", *SMOKE["startup.py"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("command") and "(runs=1)" in lines[0]
    timed = {line[:34].strip(): line[34:].split() for line in lines[1:]}
    assert set(timed) == {
        "kvmlab --help",
        "kvmlab check labs/nested.toml",
        "kvmlab ps",
        "kvmlab render labs/nested.toml",
        "kvmlab render --format libvirt",
    }
    for label, (median, low, high) in timed.items():
        assert 0 < float(low) <= float(median) <= float(high), label


def test_exits_overhead_builds_its_collectors() -> None:
    proc = bench("exits_overhead.py", *SMOKE["exits_overhead.py"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5 collector commands built"


def test_l2_tcg_variants_are_valid_labs() -> None:
    proc = bench("l2_tcg.py", *SMOKE["l2_tcg.py"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3 variant lab(s) valid"


@pytest.mark.functional
def test_boot_one_round(short_tmp: Path) -> None:
    """One kvmlab boot to a usable command (no virtme-ng), and nothing left running."""
    tmp_path = short_tmp
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "boot.py"), *SMOKE["boot.py"]],
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard, not a speed test
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ready = next(line for line in proc.stdout.splitlines() if "ready (up + exec)" in line)
    runs, low, median, high = ready.split()[5:9]
    assert runs == "1" and 0 < float(low) == float(median) == float(high)
    assert "launch total" in proc.stdout and "exec true" in proc.stdout
    assert not qemu_pids(str(tmp_path)), "boot.py stops its guest"
    assert not list(tmp_path.iterdir()), "and removes its temp directories"
