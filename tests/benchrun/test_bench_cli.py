"""``kvmlab bench`` end to end on a small lab: L0 and a real TCG guest, stored and reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LABS
from tests.readme import readme_line
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def run(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KVMLAB, *args], capture_output=True, text=True, env=env, timeout=900, cwd=cwd
    )


def test_readme_bench_example_measures_l0_and_l1(tmp_path: Path) -> None:
    """The README's ``kvmlab bench labs/basic.toml ... --only cpu``, run from a copy of the
    checkout's lab (its disk is made beside it): every asked workload has a numeric figure
    at L0 and at L1, the run is complete, the report, HTML and CSV are written (the disk
    workload at every level: the main job's test)."""
    import os

    bench_args = readme_line("kvmlab bench labs/basic.toml")
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "basic.toml").write_text((LABS / "basic.toml").read_text())
    env = {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "results.sqlite"),
    }
    bench = run(env, *bench_args, cwd=tmp_path)
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert not qemu_pids(str(tmp_path / "run")), "bench tears its guests down"
    assert not (tmp_path / "run" / "basic").exists()
    for header in ("L0 host (native)", "L1 vm1 (tcg)"):
        assert header in bench.stdout

    report = json.loads(run(env, "report", "-o", "json").stdout)
    rows = report["rows"]
    assert report["runs"][0]["complete"] is True
    by = {(r["level"], r["workload"], r["metric"]): r for r in rows}
    for workload in ("cpu",):
        metrics = {m for level, w, m in by if w == workload}
        assert metrics, f"no {workload} rows"
        for metric in metrics:
            for level in ("L0", "L1"):
                row = by.get((level, workload, metric))
                assert row is not None, f"{workload} {metric} has no {level} figure"
                assert isinstance(row["value"], int | float) and row["value"] > 0, row
                assert row["n"] == 3, row
            assert by[("L1", workload, metric)]["change_pct"] is not None
    assert by[("L1", "cpu", "1thread_events_per_s")]["accelerator"] == "tcg"

    html = tmp_path / "report.html"
    assert run(env, "report", "-o", "html", "--out", str(html)).returncode == 0
    page = html.read_text()
    assert "<svg" in page and "1thread_events_per_s" in page

    csv = run(env, "results", "export", "last", "-o", "csv").stdout.splitlines()
    assert csv[0].startswith("run,variant,guest,level")
    assert len(csv) == 1 + 2 * 2 * 3  # a row per sample: 2 metrics at 2 levels, 3 repetitions
    listing = json.loads(run(env, "results", "ls", "-o", "json").stdout)["runs"]
    assert [r["complete"] for r in listing] == [True]
