"""``auto`` by the guest's gap: the candidate that paused the guest least, from the comparison
in progress or from the newest stored one of the same guest under the same conditions."""

from __future__ import annotations

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
from kvmlab.migrate.engine_common import Workload
from kvmlab.migrate.guestside import Check
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stored import history
from kvmlab.results.model import MIGRATION_DOCUMENT, Run
from kvmlab.results.store import ResultStore
from kvmlab.spec.migration import MigrationSpec

QEMU = "/usr/bin/qemu-system-x86_64"


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
    )


def strategy(name: str, mode: str, *gaps: float, rate: float = 60) -> Strategy:
    spec = MigrationSpec(name=name, guest="vm", mode=mode, dirty_rate_mibs=rate)  # type: ignore[arg-type]
    return Strategy(spec, [run(g) for g in gaps], accel="tcg")


def test_the_gap_is_the_longer_of_heartbeats_and_network() -> None:
    assert guest_gap(30, 70) == 70 and guest_gap(90, 70) == 90
    assert guest_gap(None, 40) == 40 and guest_gap(None, None) is None
    assert outcome_gap(run(30, network_ms=55)) == 55
    assert outcome_gap(run(30, ok=False)) is None  # a failed run is no evidence
    assert stored_gap({"verdict": "VERIFIED", "guest_downtime_ms": 31, "network": {}}) == 31
    assert stored_gap({"verdict": "FAILED", "guest_downtime_ms": 31}) is None
    assert stored_gap({"verdict": "VERIFIED", "guest_downtime_ms": "x", "network": 5}) is None


def test_auto_takes_the_lowest_median_and_keeps_its_own_limits() -> None:
    auto = Settings(mode="auto", max_seconds=90, on_timeout="postcopy")
    multifd = evidence("multifd", Settings(mode="multifd", multifd_channels=4), [62, 52, 103])
    post = evidence("postcopy", Settings(mode="postcopy"), [167, 118, 184])
    xbzrle = evidence("xbzrle", Settings(mode="xbzrle"), [60, 57, 129, None])
    assert multifd and post and xbzrle
    choice = choose([post, multifd, xbzrle], auto, "this comparison")
    assert choice is not None and choice.name == "xbzrle"
    assert choice.settings == Settings(mode="xbzrle", max_seconds=90, on_timeout="postcopy")
    assert choice.reason.startswith(
        "xbzrle by the guest's gap in this comparison: median 60 ms over 3"
    )
    assert "then multifd 62 ms/3, postcopy 167 ms/3" in choice.reason
    assert choose([], auto, "here") is None


def test_auto_and_strategies_without_a_verified_gap_are_no_evidence() -> None:
    assert evidence("auto", Settings(mode="auto"), [10]) is None
    assert evidence("p", Settings(mode="precopy"), [None, None]) is None


def test_auto_runs_after_the_fixed_strategies_of_every_round() -> None:
    a, auto, b, c = (
        strategy(n, m)
        for n, m in (("a", "precopy"), ("auto", "auto"), ("b", "multifd"), ("c", "xbzrle"))
    )
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
    assert (
        reason == "no verified migration of this guest under this workload in this comparison yet"
    )


def stored_run(store: ResultStore, lab: str, strategies: list[Strategy], variant: str) -> int:
    run_id = store.start(Run(0, lab, f"{lab}.toml", "d", "quick", "0", 1795000000.0))
    store.add_document(run_id, variant, MIGRATION_DOCUMENT, to_json(strategies))
    return run_id


def test_auto_by_hand_reads_the_newest_matching_stored_comparison(tmp_path: Path) -> None:
    work = Workload(128, 60)
    with ResultStore(tmp_path / "r.sqlite") as store:
        old = stored_run(store, "migrate", [strategy("postcopy", "postcopy", 20)], "default")
        new = stored_run(
            store,
            "migrate",
            [strategy("qemu-default", "precopy", 79), strategy("xbzrle", "xbzrle", 60, 64)],
            "one-vcpu",
        )
        stored_run(store, "other-lab", [strategy("p", "precopy", 1)], "default")
        found = history(store, "migrate", "vm", work, None, "tcg", QEMU)
        assert found is not None
        candidates, where = found
        assert where.startswith(f"stored run {new} (variant one-vcpu, ")
        assert sorted(e.name for e in candidates) == ["qemu-default", "xbzrle"]
        choice = choose(candidates, Settings(mode="auto"), where)
        assert choice is not None and choice.settings.mode == "xbzrle"
        assert old < new
        for mismatch in (
            dict(workload=Workload(128, 20)),  # another dirty rate
            dict(accel="kvm"),
            dict(qemu="/opt/kvmlab-qemu10/qemu-system-x86_64"),
            dict(bandwidth=100.0),
        ):
            args = {"workload": work, "bandwidth": None, "accel": "tcg", "qemu": QEMU, **mismatch}
            assert (
                history(
                    store,
                    "migrate",
                    "vm",
                    args["workload"],  # type: ignore[arg-type]
                    args["bandwidth"],  # type: ignore[arg-type]
                    args["accel"],  # type: ignore[arg-type]
                    args["qemu"],  # type: ignore[arg-type]
                )
                is None
            ), mismatch


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
        assert history(store, "migrate", "vm", Workload(128, 60), None, "tcg", QEMU) is None
