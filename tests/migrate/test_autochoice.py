"""``auto`` by the guest's gap: the most reliable candidate that paused the guest least, from
the comparison in progress or from the newest stored one under the same conditions."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from kvmlab.migrate.autochoice import (
    choose,
    evidence,
    guest_gap,
    outcome_gap,
    stored_gap,
)
from kvmlab.migrate.compare import Strategy, auto_settings, round_order, to_json
from kvmlab.migrate.guestside import Check
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stored import Conditions, auto_by_hand, history
from kvmlab.migrate.transports.base import Route
from kvmlab.migrate.workload import Workload
from kvmlab.results.model import MIGRATION_DOCUMENT, Run
from kvmlab.results.store import ResultStore
from kvmlab.runtime.rundir import GuestRecord
from kvmlab.spec.migration import MigrationMode, MigrationSpec

QEMU = "/usr/bin/qemu-system-x86_64"
QEMU10 = "/opt/kvmlab-qemu10/qemu-system-x86_64"
GIB = 1 << 30


def run(gap_ms: float, *, network_ms: float | None = None, ok: bool = True) -> Outcome:
    """A completed migration whose guest paused ``gap_ms`` by its heartbeats."""
    return Outcome(
        "m/vm",
        "x",
        status="completed",
        guest_downtime_ms=gap_ms,
        network_downtime_ms=network_ms,
        checks_after=[Check("memory pattern", ok, "")],
        source_qemu=QEMU,
        dest_qemu=QEMU,
    )


def strategy(
    name: str, mode: MigrationMode, *gaps: float, rate: float = 60, failed: int = 0
) -> Strategy:
    spec = MigrationSpec(name=name, guest="vm", mode=mode, dirty_rate_mibs=rate)
    runs = [run(g) for g in gaps] + [run(1, ok=False) for _ in range(failed)]
    return Strategy(spec, runs, accel="tcg", shape=(1, GIB // 2))


def test_the_gap_is_the_longer_of_heartbeats_and_network() -> None:
    assert guest_gap(30, 70) == 70 and guest_gap(90, 70) == 90
    assert guest_gap(None, 40) == 40 and guest_gap(None, None) is None
    assert outcome_gap(run(30, network_ms=55)) == 55
    assert outcome_gap(run(30, ok=False)) is None  # a failed run is no evidence
    assert stored_gap({"verdict": "VERIFIED", "guest_downtime_ms": 31, "network": {}}) == 31
    assert stored_gap({"verdict": "FAILED", "guest_downtime_ms": 31}) is None
    assert stored_gap({"verdict": "VERIFIED", "guest_downtime_ms": "x", "network": 5}) is None


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -5.0, True, "12"])
def test_a_value_that_is_no_measure_is_no_gap(bad: object) -> None:
    assert guest_gap(bad, None) is None
    assert guest_gap(bad, 40) == 40
    assert stored_gap({"verdict": "VERIFIED", "guest_downtime_ms": bad, "network": None}) is None


def test_auto_takes_the_lowest_median_with_the_strategys_own_settings() -> None:
    multifd = evidence("multifd", Settings(mode="multifd", multifd_channels=4), [62, 52, 103])
    post = evidence("postcopy", Settings(mode="postcopy"), [167, 118, 184])
    xbzrle = evidence("xbzrle", Settings(mode="xbzrle", max_seconds=90), [60, 57, 129, None])
    assert multifd and post and xbzrle
    choice = choose([post, multifd, xbzrle], "this comparison")
    assert choice is not None and choice.name == "multifd"  # xbzrle: 3 of 4 verified
    assert choice.settings == Settings(mode="multifd", multifd_channels=4)
    assert choice.reason == (
        "multifd by the guest's gap in this comparison: median 62 ms, 3 of 3 run(s) verified "
        "(the others: postcopy 167 ms (3 of 3 verified); xbzrle 60 ms (3 of 4 verified))"
    )
    assert choose([], "here") is None


def test_a_strategy_that_broke_the_guest_never_wins_on_its_good_runs() -> None:
    lucky = evidence("postcopy", Settings(mode="postcopy"), [10, None, None, None, None])
    steady = evidence("precopy", Settings(mode="precopy"), [40, 41, 39, 45, 38])
    assert lucky and steady
    choice = choose([lucky, steady], "here")
    assert choice is not None and choice.name == "precopy"
    assert "postcopy 10 ms (1 of 5 verified)" in choice.reason


def test_auto_and_strategies_without_a_verified_gap_are_no_evidence() -> None:
    assert evidence("auto", Settings(mode="auto"), [10]) is None
    assert evidence("p", Settings(mode="precopy"), [None, None]) is None


def test_auto_runs_after_the_fixed_strategies_of_every_round() -> None:
    modes: tuple[tuple[str, MigrationMode], ...] = (
        ("a", "precopy"),
        ("auto", "auto"),
        ("b", "multifd"),
        ("c", "xbzrle"),
    )
    a, auto, b, c = (strategy(n, m) for n, m in modes)
    names = [[s.spec.name for s in round_order([a, auto, b, c], rep)] for rep in range(4)]
    assert names == [
        ["a", "b", "c", "auto"],
        ["b", "c", "a", "auto"],
        ["c", "a", "b", "auto"],
        ["a", "b", "c", "auto"],
    ]


def test_auto_in_a_comparison_chooses_from_the_same_conditions_only() -> None:
    auto = strategy("auto", "auto")
    others = [
        auto,
        strategy("qemu-default", "precopy", 79, 70),
        strategy("multifd", "multifd", 62, 81),
        strategy("fast-dirtier", "xbzrle", 5, rate=200),  # another workload: not evidence
    ]
    settings, reason = auto_settings(auto, others)
    assert settings.mode == "multifd" and reason is not None
    assert reason.startswith("multifd by the guest's gap in this comparison")
    assert "fast-dirtier" not in reason
    fixed = others[1]
    assert auto_settings(fixed, others) == (fixed.settings(), None)
    settings, reason = auto_settings(auto, [auto, strategy("p", "precopy")])
    assert settings.mode == "auto"
    assert reason == (
        "no verified migration of this guest under this workload in this comparison yet"
    )
    settings, reason = auto_settings(auto, [auto])
    assert settings.mode == "auto" and reason is not None
    assert reason.startswith("no fixed strategy of this guest under this workload")


def stored_run(store: ResultStore, lab: str, strategies: list[Strategy], variant: str) -> int:
    run_id = store.start(Run(0, lab, f"{lab}.toml", "d", "quick", "0", 1795000000.0))
    store.add_document(run_id, variant, MIGRATION_DOCUMENT, to_json(strategies))
    return run_id


WANT = Conditions("vm", Workload(128, 60), None, "tcg", 1, GIB // 2, QEMU, QEMU)


def test_auto_by_hand_reads_the_newest_matching_stored_comparison(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        old = stored_run(store, "migrate", [strategy("postcopy", "postcopy", 20)], "default")
        new = stored_run(
            store,
            "migrate",
            [strategy("qemu-default", "precopy", 79), strategy("xbzrle", "xbzrle", 60, 64)],
            "one-vcpu",
        )
        two_vcpus = strategy("multifd", "multifd", 1)
        two_vcpus.shape = (2, GIB // 2)
        stored_run(store, "migrate", [two_vcpus], "default")  # newer, another guest shape
        stored_run(store, "other-lab", [strategy("p", "precopy", 1)], "default")
        found = history(store, "migrate", WANT)
        assert found is not None
        candidates, where = found
        assert where.startswith(f"stored run {new} (variant one-vcpu, ")
        assert sorted(e.name for e in candidates) == ["qemu-default", "xbzrle"]
        choice = choose(candidates, where)
        assert choice is not None and choice.settings.mode == "xbzrle"
        assert old < new
        for mismatch in (
            {"workload": Workload(128, 20)},  # another dirty rate
            {"accel": "kvm"},
            {"source_qemu": QEMU10},
            {"dest_qemu": QEMU10},  # migrate --qemu another binary
            {"bandwidth_mibs": 100.0},
            {"memory": GIB},
        ):
            want = Conditions(**{**WANT.__dict__, **mismatch})
            assert history(store, "migrate", want) is None, mismatch


@pytest.mark.parametrize(
    "body",
    [
        {},
        [],
        {"strategies": "x"},
        {"strategies": [{"spec": 3}]},
        {
            "strategies": [
                {
                    "spec": {"name": "p", "guest": "vm", "dirty_rate_mibs": 60},
                    "accel": "tcg",
                    "vcpus": 1,
                    "memory": GIB // 2,
                    "outcomes": 7,
                }
            ]
        },
    ],
)
def test_a_malformed_stored_comparison_is_no_evidence(tmp_path: Path, body: object) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        run_id = store.start(Run(0, "migrate", "m.toml", "d", "quick", "0", 1.0))
        store.add_document(run_id, "default", MIGRATION_DOCUMENT, body)  # type: ignore[arg-type]
        assert history(store, "migrate", WANT) is None


@pytest.fixture
def running_vm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recorded running guest m/vm for auto_by_hand, and a results path of the test's."""
    from kvmlab.migrate import stored

    record = GuestRecord(
        lab="m",
        address=["vm"],
        pid=1,
        argv=["unshare", "--", "sh", "x", "--", QEMU, "-name", "vm"],
        accel="tcg",
        accel_reason="",
        vcpus=1,
        memory=GIB // 2,
        started=0.0,
    )
    monkeypatch.setattr(stored, "running_source", lambda _a: (None, None, record))
    results = tmp_path / "results.sqlite"
    monkeypatch.setenv("KVMLAB_RESULTS", str(results))
    return results


def test_by_hand_with_no_database_a_directory_or_a_damaged_one(running_vm: Path) -> None:
    auto = Settings(mode="auto")
    settings, reason = auto_by_hand("m/vm", auto, Workload(128, 60), Route())
    assert settings == auto and reason.startswith("no verified migration of this guest")
    running_vm.mkdir()
    settings, reason = auto_by_hand("m/vm", auto, Workload(128, 60), Route())
    assert settings == auto and reason.endswith("is a directory, not a database")
    running_vm.rmdir()
    with ResultStore(running_vm) as store:
        stored_run(store, "m", [strategy("xbzrle", "xbzrle", 60)], "default")
    db = sqlite3.connect(running_vm)
    db.execute("UPDATE documents SET body = ?", ("[" * 100000,))
    db.commit()
    db.close()
    settings, reason = auto_by_hand("m/vm", auto, Workload(128, 60), Route())
    assert settings == auto and reason.startswith(f"the results ({running_vm}) could not be read")


def test_by_hand_takes_the_stored_choice_and_says_which_options_it_leaves(
    running_vm: Path,
) -> None:
    with ResultStore(running_vm) as store:
        stored_run(
            store, "m", [strategy("xbzrle", "xbzrle", 60), strategy("p", "precopy", 80)], "d"
        )
    auto = Settings(mode="auto", downtime_limit_ms=30)
    settings, reason = auto_by_hand("m/vm", auto, Workload(128, 60), Route())
    assert settings.mode == "xbzrle" and settings.downtime_limit_ms is None
    assert reason.endswith("not used, as only auto's fallback uses them: --downtime-limit")
    through_libvirt = Route(to_uri="qemu+tcp://127.0.0.1:16590/system")
    settings, reason = auto_by_hand("m/vm", auto, Workload(128, 60), through_libvirt)
    assert settings == auto and "for a migration through libvirt" in reason
    assert json.loads(json.dumps(reason)) == reason


def test_the_recorded_qemu_is_derived_as_a_migration_records_its_source() -> None:
    record = GuestRecord(
        "m", ["vm"], 1, ["/usr/libexec/qemu-kvm", "-name", "vm"], "kvm", "", 1, 1, 0.0
    )
    assert record.qemu_binary == "/usr/libexec/qemu-kvm"
    record.argv = ["unshare", "--", "sh", "h.sh", "--", QEMU10, "-name", "vm"]
    assert record.qemu_binary == QEMU10
    record.argv = []
    assert record.qemu_binary == ""
