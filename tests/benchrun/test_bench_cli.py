"""``kvmlab bench`` end to end on a small lab: L0 and a real TCG guest, stored and reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))

LAB = """
name = "benchtest"
[guests.vm]
vcpus = 2
memory = "1G"
disks = [{ path = "scratch.qcow2", size = "256M" }]
nics = [{ type = "user" }]

[bench]
repetitions = 2
warmup = 0
duration = 1
fio_size = "16M"
fio_iodepth = 16
iperf3_streams = 2
ping_count = 3
"""


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KVMLAB, *args], capture_output=True, text=True, env=env, timeout=600)


def test_bench_levels_store_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    lab = tmp_path / "bench.toml"
    lab.write_text(LAB)
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run"),
           "KVMLAB_RESULTS": str(tmp_path / "results.sqlite")}  # fmt: skip
    bench = run(env, "bench", str(lab), "--suite", "quick")
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert not qemu_pids(str(tmp_path / "run")), "bench tears its guests down"
    assert not (tmp_path / "run" / "benchtest").exists()
    for header in ("L0 host (native)", "L1 vm (tcg)"):
        assert header in bench.stdout

    report = json.loads(run(env, "report", "--last", "-o", "json").stdout)
    rows = report["rows"]
    assert report["runs"][0]["complete"] is True
    by = {(r["level"], r["workload"], r["metric"]): r for r in rows}
    for workload, metric in [
        ("cpu", "1thread_events_per_s"), ("memory", "seq1m_bandwidth_mib_s"),
        ("disk", "randread_iops"), ("disk", "randwrite_iops"),
        ("network", "to_parent_received_gbit_s"), ("network", "ping_rtt_avg_ms"),
    ]:  # fmt: skip
        for level in ("L0", "L1"):
            row = by[(level, workload, metric)]
            assert row["n"] == 2 and row["value"] > 0, row
        assert by[("L1", workload, metric)]["change_pct"] is not None
    assert by[("L1", "boot", "total_s")]["value"] > 0
    assert by[("L1", "cpu", "1thread_events_per_s")]["accelerator"] == "tcg"
    assert "--direct=1" in by[("L0", "disk", "randread_iops")]["command"]

    html = tmp_path / "report.html"
    assert run(env, "report", "--last", "-o", "html", "--out", str(html)).returncode == 0
    page = html.read_text()
    assert "<svg" in page and "randread_iops" in page

    csv = run(env, "results", "export", "last", "-o", "csv").stdout.splitlines()
    assert csv[0].startswith("run,variant,guest,level")
    assert len(csv) > 20
    listing = json.loads(run(env, "results", "ls", "-o", "json").stdout)
    assert [r["complete"] for r in listing] == [True]
