"""The ``cpu`` workload: sysbench cpu on one thread and on every vCPU, events per second."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.bench.parsers.sysbench import parse_sysbench_cpu
from kvmlab.bench.registry import LevelWorkload, Settings, Step, register

if TYPE_CHECKING:
    from kvmlab.bench.executor import Place


def steps(place: Place, s: Settings) -> list[Step]:
    def step(name: str, threads: int) -> Step:
        argv = [
            "sysbench",
            "cpu",
            f"--threads={threads}",
            f"--time={s.duration:g}",
            "--cpu-max-prime=10000",
            "run",
        ]
        return Step(name, argv, parse_sysbench_cpu, s.duration + 60, keep=("events_per_s",))

    return [step("1thread", 1), step("allcpus", place.vcpus)]


register(
    LevelWorkload(
        "cpu",
        order=10,
        steps=steps,
        metrics=("1thread_events_per_s", "allcpus_events_per_s"),
        suites=("quick", "full"),
    )
)
