"""The main job's path, as ``make demo`` runs it: the shipped nested lab, L0/L1/L2, report.

The shipped ``labs/nested.toml`` (copied, with a short ``[bench]`` table: one repetition of
2 s, so the whole quick suite stays within CI's budget) under the default accelerators: on
a host without hardware KVM, L1 under TCG with one vCPU and L2 under KVM inside it. Every
metric of the quick suite ``make demo`` runs has a figure at L0, L1 and L2 in the JSON
report, the level table is printed, the HTML report written, nothing left running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LABS
from tests.readme import readme_line
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
SHORT = "\n[bench]\nrepetitions = 1\nwarmup = 0\nduration = 2\n"


def test_nested_lab_measured_at_every_level(tmp_path: Path) -> None:
    lab = tmp_path / "nested.toml"
    lab.write_text((LABS / "nested.toml").read_text() + SHORT)
    report = tmp_path / "report.html"
    env = {
        **os.environ,
        "KVMLAB_RUN_DIR": str(tmp_path / "run"),
        "KVMLAB_RESULTS": str(tmp_path / "results.sqlite"),
    }
    run = subprocess.run(
        [KVMLAB, *readme_line("kvmlab run nested", lab=str(lab)), "--out", str(report)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert not qemu_pids(str(tmp_path / "run")), "the run tears every level down"
    assert not (tmp_path / "run" / "nested").exists()

    header = next(line for line in run.stdout.splitlines() if "L0 host" in line)
    assert "L1 l1 (tcg)" in header or "L1 l1 (kvm)" in header
    assert "L2 l1/l2 (kvm)" in header, "L2 runs under KVM by default, on any host"
    assert "runs under TCG with one vCPU" in run.stderr, "the run says why L2 got KVM"

    page = report.read_text()
    assert "L2" in page and "<svg" in page
    dump = subprocess.run(
        [KVMLAB, "report", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    document = json.loads(dump.stdout)
    assert document["runs"][0]["complete"] is True
    rows = {(r["level"], r["workload"], r["metric"]): r for r in document["rows"]}
    workloads = {w for _, w, _ in rows}
    assert workloads >= {"cpu", "memory", "disk", "network", "boot"}, workloads
    lacking = []
    for workload, metric in {(w, m) for _, w, m in rows}:
        levels = ("L1", "L2") if workload == "boot" else ("L0", "L1", "L2")
        for level in levels:
            row = rows.get((level, workload, metric))
            if row is None or not isinstance(row["value"], int | float):
                lacking.append(f"{workload} {metric} at {level}")
    assert not lacking, f"no figure for: {lacking}"
    assert "--direct=1" in rows[("L0", "disk", "randread_iops")]["command"]  # the nested-KVM fio
