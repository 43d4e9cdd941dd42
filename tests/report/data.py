"""Hand-made summaries shaped like a nested-lab run (the nested-KVM write-up's): L0 host, L1
guest, L2 guest."""

from __future__ import annotations

from kvmlab.report.table import LevelTable, level_table
from kvmlab.results.model import Run, Summary

TITLE = 'nested <lab> & "fio"'
COMMAND = 'fio --name=<rand> --filename=/tmp/a&b "x"'

PLACES = (("host", "L0", "native"), ("l1", "L1", "tcg"), ("l1/l2", "L2", "kvm"))
METRICS = (
    # workload, metric, unit, higher is better, L0, L1, L2 medians
    ("cpu", "events", "events/s", True, 1210.0, 152.0, 96.5),
    ("cpu", "latency", "ms", False, 0.83, 6.6, 10.4),
    ("disk", "randread", "IOPS", True, 48200.0, 23100.0, 11000.0),
    ("disk", "randwrite", "MB/s", True, 180.0, 132.0, 61.0),
)
BOOT_STAGES = (("qemu", 0.31, 0.62), ("kernel", 2.4, 5.1), ("init", 1.1, 2.6), ("agent", 0.42, 0.9))


def summary(
    variant: str,
    place: tuple[str, str, str],
    workload: str,
    metric: str,
    unit: str,
    higher: bool,
    median: float,
    n: int = 5,
    spread: float = 0.04,
) -> Summary:
    """A summary whose min/max lie ``spread`` (relative) around the median, its ``n``
    repetitions evenly between them."""
    guest, level, accel = place
    steps = [2 * i / (n - 1) - 1 for i in range(n)] if n > 1 else [0.0]
    return Summary(
        variant=variant,
        guest=guest,
        level=level,
        accel=accel,
        workload=workload,
        metric=metric,
        unit=unit,
        higher_is_better=higher,
        n=n,
        median=median,
        minimum=median * (1 - spread),
        maximum=median * (1 + spread),
        stdev=median * spread / 2,
        command=COMMAND,
        values=tuple(median * (1 + spread * step) for step in steps),
    )


def summaries(variant: str = "default", scale: float = 1.0) -> list[Summary]:
    """Two workloads (cpu, disk) with two metrics each, at L0, L1 and L2."""
    out = []
    for workload, metric, unit, higher, *values in METRICS:
        for place, value in zip(PLACES, values, strict=True):
            factor = scale if place[1] != "L0" else 1.0
            out.append(
                summary(
                    variant,
                    place,
                    workload,
                    metric,
                    unit,
                    higher,
                    value * (factor if higher else 1 / factor),
                )
            )
    return out


def boot(variants: tuple[str, ...] = ("default",)) -> list[Summary]:
    """Boot stages and total of L1 and L2 in seconds."""
    out = []
    for variant in variants:
        for place in PLACES[1:]:
            at = 1 if place[1] == "L1" else 2
            stages = [(m, values[at - 1]) for m, *values in BOOT_STAGES]
            for metric, value in [*stages, ("total", sum(v for _, v in stages) * 1.02)]:
                out.append(summary(variant, place, "boot", metric, "s", False, value, n=3))
    return out


def one_variant() -> LevelTable:
    """3 levels, 2 workloads, one variant."""
    return level_table(summaries())


def two_variants(scale: float = 1.45) -> LevelTable:
    """The same with a second variant, its guests ``scale`` times faster."""
    return level_table(summaries() + summaries("tuned", scale=scale))


def run(run_id: int = 7, complete: bool = True) -> Run:
    """A run with host facts as ``kvmlab bench`` records them (plus an unknown key)."""
    return Run(
        id=run_id,
        lab="nested<&>",
        lab_file="labs/nested.toml",
        spec_digest="ab" * 32,
        suite="seed-000",
        kvmlab_version="0.1.0",
        started=1_717_000_000.0,
        ended=1_717_000_754.0,
        complete=complete,
        host={
            "cpu": "AuthenticAMD AMD EPYC 7B13",
            "cpus": 2,
            "memory_gib": 7.8,
            "kernel": "6.1.0-21-cloud-amd64",
            "kvm_flavour": "kvm_pvm",
            "accelerator": "tcg",
            "accelerator_reason": 'kvm_pvm is loaded: guests run under TCG <& "x">',
            "qemu": "QEMU emulator version 7.2.9",
            "extra": {"nested": True},
        },
    )
