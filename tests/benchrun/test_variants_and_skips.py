"""The lab as written is measured beside its variants, never replaced by them; a workload
asked for that a guest cannot run is refused before anything starts, or (found only while
running) leaves the run incomplete with the reason on its row. No guest boots here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvmlab.bench.executor import Place
from kvmlab.bench.runner import LevelRunner
from kvmlab.bench.session import unmeasurable
from kvmlab.bench.suite import SUITES
from kvmlab.errors import SpecError, UsageError
from kvmlab.progress import QUIET
from kvmlab.results.model import Run
from kvmlab.results.store import ResultStore
from kvmlab.spec import load_lab

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))

LAB = """
name = "vartest"
[guests.vm]
vcpus = 1
memory = "512M"
disks = [{ path = "scratch.qcow2", size = "64M" }]
nics = [{ type = "user" }]

[variants.mig.guests.vm]
migratable = true

[variants.two.guests.vm]
vcpus = 2
"""


def _lab(tmp_path: Path, text: str = LAB) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return path


def test_variants_start_with_the_lab_as_written(tmp_path: Path) -> None:
    loaded = load_lab(_lab(tmp_path))
    assert list(loaded.variants()) == ["default", "mig", "two"]
    assert loaded.variants()["default"].lab.guests["vm"].migratable is False
    assert list(loaded.variants(["two"])) == ["two"]
    with pytest.raises(UsageError, match=r"no variant 'nope'.*default, mig, two"):
        loaded.variants(["nope"])


def test_a_variant_may_not_be_called_default(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="names the lab as written"):
        load_lab(_lab(tmp_path, LAB + "\n[variants.default.guests.vm]\nvcpus = 2\n"))


def test_a_migratable_variant_cannot_run_the_suite(tmp_path: Path) -> None:
    loaded = load_lab(_lab(tmp_path))
    settings = SUITES["quick"]
    lost = unmeasurable(loaded, settings, {"L0", "L1"})
    assert len(lost) == 1 and lost[0].startswith("variant mig: vartest/vm (L1) cannot run cpu")
    assert "self-contained image" in lost[0]
    from dataclasses import replace

    assert unmeasurable(loaded, replace(settings, variants=("default", "two")), {"L1"}) == []
    assert unmeasurable(loaded, settings, {"L0"}) == []


def test_bench_refuses_before_anything_starts(tmp_path: Path) -> None:
    """A guest without a disk asked for ``disk``, a migratable variant asked for ``cpu``:
    exit 2, one line naming each, nothing stored or started."""
    lab = _lab(tmp_path, LAB.replace('disks = [{ path = "scratch.qcow2", size = "64M" }]\n', ""))
    env = {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "results.sqlite"),
    }
    proc = subprocess.run(
        [KVMLAB, "bench", str(lab), "--levels", "L0,L1", "--only", "cpu,disk"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "vartest/vm (L1) cannot run disk: no scratch disk" in proc.stderr
    assert "variant mig: vartest/vm (L1) cannot run cpu, disk" in proc.stderr
    assert "--variant NAME" in proc.stderr and "nothing was started" in proc.stderr
    listed = subprocess.run(
        [KVMLAB, "results", "ls", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "vartest" not in listed.stdout, "nothing was stored"
    assert not (tmp_path / "run" / "vartest").exists()


def test_a_skip_found_while_running_leaves_the_run_incomplete(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        run_id = store.start(Run(0, "vartest", "lab.toml", "x", "quick", "0", 0.0))
        runner = LevelRunner(store, run_id, "default", SUITES["quick"], QUIET, {}, "vartest")
        place = Place("vm", "L1", "tcg", 1, "/dev/vdb", "10.0.2.2", tools=False)
        samples = runner.workloads(_NoRun(place), _NoRun(place))  # type: ignore[arg-type]
        assert samples == []
        assert runner.skipped and "L1 vartest/vm did not measure cpu" in runner.skipped[0]
        failures = store.run(run_id).failures
        assert {f.stage for f in failures} >= {"cpu", "disk"}
        assert all(f.skipped and f.exit_code == 3 for f in failures)


class _NoRun:
    """An executor that must never be asked to run anything."""

    def __init__(self, place: Place) -> None:
        self.place = place

    def run(self, argv: list[str], timeout: float) -> None:
        raise AssertionError(f"ran {argv}")
