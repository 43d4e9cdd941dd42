"""Suites: how long and how often each workload runs, before the lab's own overrides; which
workloads a suite runs is each workload's registration (:mod:`kvmlab.bench.registry`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvmlab.bench.registry import Settings, lab_workloads, suite_workloads
from kvmlab.errors import UsageError
from kvmlab.spec.bench import BenchSpec

SUITES = {
    # quick: a few minutes per level on a 2-core host with TCG guests. No warm-up run: under
    # TCG-in-TCG (L2 here) starting a tool costs more than the measurement (fio 18 s, sysbench
    # 7 s, measured), a warm-up does not make that cheaper, and the median of 3 absorbs a
    # cold first run. Three, measured (docs/measurements.md, "Noise between runs"): at three
    # the intervals of cpu, memory and disk lie inside their noise thresholds; the network's
    # needs five (--reps 5 or auto).
    "quick": Settings(
        "quick",
        suite_workloads("quick"),
        repetitions=3,
        warmup=0,
        duration=3.0,
        fio_size="64M",
        fio_iodepth=128,
        iperf3_streams=4,
        ping_count=10,
    ),
    # full: the nested-KVM write-up's fio size and the networking course lab's 30 iperf3
    # streams, longer runs, the build.
    "full": Settings(
        "full",
        suite_workloads("full"),
        repetitions=5,
        warmup=1,
        duration=10.0,
        fio_size="1G",
        fio_iodepth=128,
        iperf3_streams=30,
        ping_count=20,
    ),
}


def settings_for(suite: str, lab: BenchSpec, only: list[str] | None = None) -> Settings:
    """The suite's settings with the lab's ``[bench]`` values and ``--only`` applied (the
    lab's own workloads, ``pvp``, ``netcompare`` and ``migrations``, are accepted and left
    to :mod:`kvmlab.bench.plan`)."""
    if suite not in SUITES:
        raise UsageError(f"unknown suite {suite!r}; choose {' or '.join(SUITES)}")
    base = SUITES[suite]
    workloads = base.workloads
    every = suite_workloads()
    if lab.workloads:
        workloads = tuple(w for w in every if w in lab.workloads)
    if only:
        known = (*every, *(w.name for w in lab_workloads()))
        unknown = [w for w in only if w not in known]
        if unknown:
            raise UsageError(
                f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(known)}"
            )
        workloads = tuple(w for w in every if w in only)
    overrides = {
        "repetitions": lab.repetitions,
        "warmup": lab.warmup,
        "duration": lab.duration,
        "fio_size": lab.fio_size,
        "fio_iodepth": lab.fio_iodepth,
        "iperf3_streams": lab.iperf3_streams,
        "ping_count": lab.ping_count,
    }
    changes: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    return replace(base, workloads=workloads, **changes)
