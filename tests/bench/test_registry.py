"""One registration per workload: the registry is the truth, spec's table of what a lab file
may name is held equal to it, every workload runs through it (the suite's and the lab's own),
and a workload registered by one module runs, is stored and is reported with nothing else
changed. Nothing boots: the runs here measure L0 through a fake executor."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

import kvmlab.bench.session as session
from kvmlab.bench import registry
from kvmlab.bench.executor import Completed, HostExecutor, Place
from kvmlab.bench.parsers import Metric, ParseError
from kvmlab.bench.registry import (
    BootStages,
    GuestsWorkload,
    LabRun,
    LabWorkload,
    LevelWorkload,
    Settings,
    Step,
    register,
)
from kvmlab.bench.suite import SUITES
from kvmlab.cli.main import main
from kvmlab.errors import KvmlabError
from kvmlab.results.model import Sample
from kvmlab.results.store import ResultStore
from kvmlab.spec.bench import EXITS, LAB_WORKLOADS, SUITE_METRICS, WORKLOADS, WorkloadName
from tests.bench.recorded import recorded

# -- spec's table is the registry's --------------------------------------------------------


def test_spec_names_the_suite_workloads_in_the_registrys_order_with_their_metrics() -> None:
    suite = {
        w.name: w.metrics for w in registry.workloads() if isinstance(w, LevelWorkload | BootStages)
    }
    assert suite == SUITE_METRICS, (
        "kvmlab.spec.bench.SUITE_METRICS is spec's copy of the registry: add or change the "
        f"workload's line there to {suite}"
    )
    assert list(WORKLOADS) == list(suite) == list(registry.suite_workloads())


def test_spec_names_the_labs_own_workloads_and_the_exit_profile() -> None:
    lab = {w.name for w in registry.lab_workloads()}
    assert set(LAB_WORKLOADS) == lab
    assert set(get_args(WorkloadName)) == {*registry.suite_workloads(), *lab}
    assert [w.name for w in registry.guests_workloads()] == [EXITS]


def test_the_suites_run_what_each_workload_registered_for() -> None:
    assert SUITES["quick"].workloads == ("cpu", "memory", "disk", "network", "boot")
    assert SUITES["full"].workloads == WORKLOADS
    assert registry.table_order() == (*WORKLOADS, EXITS)  # the level table's rows


def test_each_level_workload_stores_the_metrics_it_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvmlab.bench.workloads import kbuild

    monkeypatch.setattr(kbuild, "prepare_source", lambda: Path("/cache/kbuild/lua/tree"))
    place = Place("vm", "L1", "kvm", 2, "/dev/vdb", "10.0.2.2")
    for w in registry.level_workloads():
        assert w.unmet(place) is None
        steps = w.steps(place, SUITES["full"])
        stored = tuple(s.label(Metric(kept, 0.0, "", True)) for s in steps for kept in s.keep)
        assert stored == w.metrics, w.name


def test_a_place_without_what_a_workload_needs_says_why() -> None:
    disk, network, cpu = (registry.named(n) for n in ("disk", "network", "cpu"))
    assert isinstance(disk, LevelWorkload) and isinstance(network, LevelWorkload)
    assert isinstance(cpu, LevelWorkload)
    bare = Place("vm", "L1", "tcg", 1, None, None)
    assert disk.unmet(bare) == "no scratch disk: give the guest a disk (it boots the default image)"
    assert network.unmet(bare) == "no user-networking NIC to reach the level below"
    assert cpu.unmet(bare) is None
    migratable = Place("vm", "L1", "tcg", 1, "/dev/vdb", "10.0.2.2", tools=False)
    assert "it is migratable" in (cpu.unmet(migratable) or "")


def test_a_name_is_registered_once(fresh: None) -> None:
    with pytest.raises(ValueError, match="'cpu' is registered already"):
        register(LevelWorkload("cpu", 1, lambda p, s: [], (), ("quick",)))


def test_each_workload_module_of_a_domain_registers_and_nothing_else_does() -> None:
    """A workload is one module of a domain's ``workloads`` package: every such module
    registers what it defines, and every workload comes from one."""
    src = Path(registry.__file__).resolve().parents[1]
    modules = {
        f"kvmlab.{p.parent.parent.name}.workloads.{p.stem}"
        for p in src.glob("*/workloads/*.py")
        if p.stem != "__init__"
    }
    defined = {
        w.steps.__module__ if isinstance(w, LevelWorkload) else w.run.__module__
        for w in registry.workloads()
        if not isinstance(w, BootStages)
    }
    assert defined <= modules
    assert modules - defined == {"kvmlab.bench.workloads.boot"}  # boot stages: no callable
    assert {"kvmlab.bench.workloads.cpu", "kvmlab.net.workloads.pvp"} <= defined


# -- a workload of one module: registered in the test, run, stored and reported --------------

UPTIME = "uptime"
LOADAVG = "0.42 0.30 0.25 1/123 4567\n"


def parse_loadavg(text: str) -> list[Metric]:
    """/proc/loadavg: the 1-minute load average."""
    fields = text.split()
    try:
        return [Metric("load1_ratio", float(fields[0]), "ratio", False)]
    except (IndexError, ValueError):
        raise ParseError("loadavg", "no load average in the output", text) from None


def uptime_steps(place: Place, s: Settings) -> list[Step]:
    return [Step("loadavg", ["cat", "/proc/loadavg"], parse_loadavg, 10, keep=("load1_ratio",))]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry as the modules made it; what a test registers goes with the test."""
    registry.workloads()
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))


class FakeHost(HostExecutor):
    """L0 answering from recordings instead of running anything."""

    ran: list[list[str]] = []

    def run(self, argv: list[str], timeout: float) -> Completed:
        FakeHost.ran.append(argv)
        if argv[0] == "sysbench":
            return Completed(argv, 0, recorded("sysbench-cpu-threads1.txt"), "")
        return Completed(argv, 0, LOADAVG, "")


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> Iterator[Path]:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "results.sqlite"))
    monkeypatch.setattr(session, "HostExecutor", FakeHost)
    FakeHost.ran = []
    lab = tmp_path / "one.toml"
    lab.write_text('name = "one"\n[guests.vm]\n[bench]\nrepetitions = 2\n')
    yield lab


def kvmlab(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["kvmlab", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_a_workload_registered_by_one_module_runs_is_stored_and_reported(
    host: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    register(LevelWorkload(UPTIME, 15, uptime_steps, ("loadavg_load1_ratio",), ("quick",)))
    status, out, err = kvmlab(
        capsys, monkeypatch, "bench", str(host), "--levels", "L0", "--only", f"{UPTIME},cpu"
    )
    assert status == 0, err
    assert FakeHost.ran.count(["cat", "/proc/loadavg"]) == 2  # 2 repetitions, no warm-up
    assert "suite quick: cpu, uptime;" in err  # in the registry's order
    assert "L0 host uptime done" in err
    with ResultStore() as store:
        run = store.run("last")
        got = [
            (s.workload, s.metric, s.value) for s in store.samples(run.id) if s.workload == UPTIME
        ]
    assert got == [(UPTIME, "loadavg_load1_ratio", 0.42)] * 2
    status, out, _ = kvmlab(capsys, monkeypatch, "report", "last", "-o", "json")
    assert status == 0
    rows = json.loads(out)["rows"]
    assert [(r["workload"], r["metric"], r["value"]) for r in rows if r["workload"] == UPTIME] == [
        (UPTIME, "loadavg_load1_ratio", 0.42)
    ]
    assert [r["workload"] for r in rows] == ["cpu", "cpu", UPTIME]  # order 10, then 15


def test_a_labs_own_workload_runs_after_the_suite_and_ends_the_command_after_the_report(
    host: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[LabRun] = []

    class Odd(KvmlabError):
        exit_code = 4

    def run(lab: LabRun) -> list[str]:
        seen.append(lab)
        lab.at("L0", "host", "odd")
        row = Sample(
            lab.variant, "host", "L0", "native", "odd", "oddity", 7.0, "count", False, 0, ""
        )
        lab.add([row, replace(row, repetition=1, value=9.0)])
        return ["something odd"]

    register(
        LabWorkload(
            "odd",
            95,
            what="[guests]",
            levels=frozenset({"L0"}),
            declared=lambda lab: bool(lab.guests),
            describe=lambda lab: "an odd look at the host",
            run=run,
            fault=lambda run_id, found: Odd(f"run {run_id}: {'; '.join(found)}"),
        )
    )
    status, out, err = kvmlab(
        capsys, monkeypatch, "bench", str(host), "--levels", "L0", "--only", "cpu"
    )
    assert status == 0 and not seen  # --only leaves it out
    status, out, err = kvmlab(
        capsys, monkeypatch, "bench", str(host), "--levels", "L0", "--only", "cpu,odd"
    )
    assert status == 4, err
    assert "an odd look at the host after the suite" in err and "run 2: something odd" in err
    assert "L0 host cpu done" in err and "time spent" in err and " odd " in err
    assert [(lab.variant, lab.levels, lab.repetitions) for lab in seen] == [("default", {"L0"}, 2)]
    assert "oddity" in out, "the report comes first"
    status, out, _ = kvmlab(capsys, monkeypatch, "report", "2", "-o", "json")
    rows = [(r["workload"], r["metric"], r["value"]) for r in json.loads(out)["rows"]]
    assert rows[-1] == ("odd", "oddity", 8.0) and rows[0][0] == "cpu"
    status, _, err = kvmlab(
        capsys, monkeypatch, "bench", str(host), "--only", "odd", "--levels", "L0"
    )
    assert status == 4, err
    assert "suite quick: no workloads; an odd look" in err


def test_a_guests_workload_the_lab_does_not_ask_for_is_not_run(fresh: None) -> None:
    ran: list[object] = []
    register(GuestsWorkload("never", 85, wanted=lambda lab: False, run=ran.append))
    assert [w.name for w in registry.guests_workloads()] == [EXITS, "never"]
    assert not ran
