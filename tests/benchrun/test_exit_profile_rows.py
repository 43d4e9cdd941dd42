"""The exit profile beside each configuration, as the run's rows: vendor-neutral kinds."""

from __future__ import annotations

from kvmlab.bench.workloads.exits import load_argv, samples
from kvmlab.exits.model import Profile, ReasonStat


def test_rows_are_exits_per_second_in_all_then_by_kind_most_frequent_first() -> None:
    profile = Profile("m/l1/l2", "tracepoints", "", 4.0, vendor="svm")
    profile.reasons = [
        ReasonStat("PF excp", "exception", 4000),
        ReasonStat("write_cr3", "cr_access", 1200),
        ReasonStat("read_cr3", "cr_access", 400),
        ReasonStat("hlt", "hlt", 40),
        ReasonStat("invlpg", "invlpg", 800),
    ]
    rows = samples(profile, "l1-shadow", "l1/l2", "L2")
    assert [(r.metric, r.value) for r in rows] == [
        ("all_per_s", 1610.0),
        ("exception_per_s", 1000.0),
        ("cr_access_per_s", 400.0),
        ("invlpg_per_s", 200.0),
        ("hlt_per_s", 10.0),
    ]
    assert {(r.workload, r.unit, r.higher_is_better, r.accel) for r in rows} == {
        ("exits", "exits/s", False, "kvm")
    }
    assert all(r.variant == "l1-shadow" and r.level == "L2" for r in rows)


def test_the_load_is_the_fork_stressor_on_every_vcpu_for_longer_than_the_window() -> None:
    assert load_argv(2, 19.4) == ["stress-ng", "--fork", "2", "--timeout", "19s", "-q"]
