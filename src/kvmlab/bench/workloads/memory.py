"""The ``memory`` workload: sysbench memory, sequential 1 MiB-block bandwidth and random
4 KiB-block access rate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.bench.parsers.sysbench import parse_sysbench_memory
from kvmlab.bench.registry import LevelWorkload, Settings, Step, register

if TYPE_CHECKING:
    from kvmlab.bench.executor import Place


def steps(place: Place, s: Settings) -> list[Step]:
    def step(name: str, block: str, mode: str, keep: tuple[str, ...]) -> Step:
        argv = [
            "sysbench",
            "memory",
            "--threads=1",
            f"--memory-block-size={block}",
            "--memory-total-size=100T",
            f"--memory-access-mode={mode}",
            f"--time={s.duration:g}",
            "run",
        ]
        return Step(name, argv, parse_sysbench_memory, s.duration + 60, keep=keep)

    return [
        step("seq1m", "1M", "seq", ("bandwidth_mib_s",)),
        step("rnd4k", "4K", "rnd", ("ops_per_s",)),
    ]


register(
    LevelWorkload(
        "memory",
        order=20,
        steps=steps,
        metrics=("seq1m_bandwidth_mib_s", "rnd4k_ops_per_s"),
        suites=("quick", "full"),
    )
)
