"""``bench/session.py`` running a suite at L0 and in stub guests at L1 and storing what it
measured, tagged by level and guest, in well under a second of guests (the tools answer
with recorded output: sysbench's, kept in tests/bench/data)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from kvmlab.bench.registry import AUTO_MIN, Settings
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


def _noisy_sysbench(tools: Path) -> None:
    """``sysbench`` whose events per second alternate between 1000 and 3000: an interval
    that never narrows."""
    script = (
        "#!/bin/sh\n"
        f'n=$(cat "{tools}/n" 2>/dev/null || echo 0); echo $((n + 1)) > "{tools}/n"\n'
        f"if [ $((n % 2)) = 0 ]; then v=1000.00; else v=3000.00; fi\n"
        f'sed "s/3041.04/$v/" "{RECORDED}"\n'
    )
    (tools / "sysbench").write_text(script)


@pytest.mark.parametrize("noisy", [False, True])
def test_reps_auto_stops_once_precise_and_never_past_its_maximum(
    stub_labs: StubLabs, recorded_tools: Path, tmp_path: Path, noisy: bool
) -> None:
    """A tool that answers the same every time is precise after the minimum of three; one
    that swings by 3x never is, and gets the maximum (here 6)."""
    if noisy:
        _noisy_sysbench(recorded_tools)
    loaded = stub_labs.lab("auto", {"vm1": {}})
    store = ResultStore(tmp_path / "results.sqlite")
    settings = replace(SUITE, workloads=("cpu",), repetitions=6, auto_width=0.05)
    run_id = run_bench(
        loaded, settings, {"L0"}, store, stub_labs.launch(StubBackend()), {"backend": "stub"}
    )
    reps = {s.repetition for s in store.samples(run_id) if s.metric == "1thread_events_per_s"}
    assert reps == set(range(6 if noisy else AUTO_MIN))


def test_interleaved_configurations_alternate_each_round_on_a_fresh_boot(
    stub_labs: StubLabs, recorded_tools: Path, tmp_path: Path
) -> None:
    """``--interleave``: the lab as written and its variant boot in turn, A B A B A B, each
    running its workloads once a round; every configuration still gets its three
    repetitions, numbered by round, and the run says how they were ordered."""
    loaded = stub_labs.lab("ab", {"vm": {}}, extra="[variants.two.guests.vm]\nvcpus = 2\n")
    store = ResultStore(tmp_path / "results.sqlite")
    backend = StubBackend()
    settings = replace(SUITE, workloads=("cpu", "boot"), repetitions=3, interleave=True)
    run_id = run_bench(
        loaded, settings, {"L0", "L1"}, store, stub_labs.launch(backend), {"backend": "stub"}
    )
    assert [m.config.vcpus for m in backend.made] == [1, 2, 1, 2, 1, 2]
    assert not any(m.is_alive() for m in backend.made)
    rows = [s for s in store.samples(run_id) if s.level == "L1" and s.metric.startswith("1thread")]
    for variant in ("default", "two"):
        assert sorted(s.repetition for s in rows if s.variant == variant) == [0, 1, 2]
    boots = {(s.variant, s.repetition) for s in store.samples(run_id) if s.workload == "boot"}
    assert boots == {(v, r) for v in ("default", "two") for r in range(3)}
    host = [s for s in store.samples(run_id) if s.level == "L0" and s.variant == "default"]
    assert {s.repetition for s in host} == {0, 1, 2}, "L0 once, its repetitions as asked"
    facts = store.run(run_id).host
    assert facts["repetition_order"] == "interleaved: default two, 3 rounds"
    rounds = [line for line in stub_labs.progress if "round " in str(line)]
    assert [str(r).split(": ")[-1] for r in rounds][:2] == ["default", "two"]
    assert store.run(run_id).complete


def test_interleave_is_refused_where_nothing_alternates() -> None:
    from kvmlab.bench.bench_job import interleaved
    from kvmlab.errors import UsageError

    with pytest.raises(UsageError, match="measure two or more"):
        interleaved(SUITE, 1, {"L0", "L1"})
    with pytest.raises(UsageError, match="L0 is measured once"):
        interleaved(SUITE, 2, {"L0"})
    with pytest.raises(UsageError, match="give --reps N"):
        interleaved(replace(SUITE, auto_width=0.05), 2, {"L1"})
    assert interleaved(SUITE, 2, {"L1"}).interleave
