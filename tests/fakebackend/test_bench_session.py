"""``bench/session.py`` running a suite at L0 and in stub guests at L1 and storing what it
measured, tagged by level and guest, in well under a second of guests (the tools answer
with recorded output: sysbench's, kept in tests/bench/data)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvmlab.bench.registry import Settings
from kvmlab.bench.session import run_bench
from kvmlab.results.store import ResultStore
from kvmlab.runtime.rundir import LabDir
from tests.fakebackend.backend import StubBackend
from tests.fakebackend.conftest import StubLabs

RECORDED = Path(__file__).resolve().parents[1] / "bench" / "data" / "sysbench-cpu-threads1.txt"
SUITE = Settings(
    "stub",
    ("cpu", "boot"),
    repetitions=2,
    warmup=0,
    duration=0.1,
    fio_size="1M",
    fio_iodepth=1,
    iperf3_streams=1,
    ping_count=1,
)


@pytest.fixture
def recorded_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``sysbench`` on PATH, answering every run with a recorded report (the host's and a
    stub guest's commands both run here: a guest's agent inherits this PATH)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    sysbench = tools / "sysbench"
    sysbench.write_text(f'#!/bin/sh\necho "$@" >> "{tools}/calls"\ncat "{RECORDED}"\n')
    sysbench.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    return tools


def test_a_suite_at_l0_and_l1_stores_each_level_s_samples(
    stub_labs: StubLabs, recorded_tools: Path, tmp_path: Path
) -> None:
    loaded = stub_labs.lab("bench", {"vm1": {}, "vm2": {"vcpus": "2"}})
    store = ResultStore(tmp_path / "results.sqlite")
    backend = StubBackend()
    run_id = run_bench(
        loaded, SUITE, {"L0", "L1"}, store, stub_labs.launch(backend), {"backend": "stub"}
    )
    samples = store.samples(run_id)
    where = {(s.level, s.guest, s.workload, s.metric) for s in samples}
    for guest in ("host", "vm1", "vm2"):
        level = "L0" if guest == "host" else "L1"
        assert (level, guest, "cpu", "1thread_events_per_s") in where
        assert (level, guest, "cpu", "allcpus_events_per_s") in where
    assert {("L1", g, "boot") for g in ("vm1", "vm2")} <= {(s[0], s[1], s[2]) for s in where}
    cpu = [s for s in samples if s.workload == "cpu"]
    assert {s.value for s in cpu} == {3041.04}  # the recorded report, parsed at every level
    assert {s.repetition for s in cpu} == {0, 1}  # the suite's two repetitions
    accel = {s.guest: s.accel for s in samples}
    assert accel == {"host": "native", "vm1": "tcg", "vm2": "tcg"}
    calls = (recorded_tools / "calls").read_text().splitlines()
    assert "cpu --threads=2 --time=0.1 --cpu-max-prime=10000 run" in calls  # vm2's vCPUs
    assert store.run(run_id).complete
    assert [m.config.name for m in backend.made] == ["bench/vm1", "bench/vm2"]
    assert not any(m.is_alive() for m in backend.made)
    assert not LabDir.of("bench").exists()  # torn down after measuring
