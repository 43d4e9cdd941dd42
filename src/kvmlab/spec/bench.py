"""The ``[bench]`` table of a lab: which workloads, how long, how often."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kvmlab.spec.base import SpecModel
from kvmlab.spec.network import NetCompareSpec
from kvmlab.spec.switch import PvpSpec

WorkloadName = Literal[
    "cpu", "memory", "disk", "network", "boot", "kbuild", "pvp", "migrations", "netcompare"
]
WORKLOADS: tuple[WorkloadName, ...] = ("cpu", "memory", "disk", "network", "boot", "kbuild")
"""The suite's workloads: the same commands at every level."""
LAB_WORKLOADS: tuple[WorkloadName, ...] = ("pvp", "migrations", "netcompare")
"""Workloads of what a lab declares: PVP through its `[switch]`, its `[[migrations]]`, the
network paths between its guests (`[networks]`, addressed switch ports, user NICs)."""


class BenchSpec(SpecModel):
    """Benchmark settings; unset values come from the suite (`quick` or `full`)."""

    workloads: list[WorkloadName] = []
    """Workloads to run (empty: all of the suite's, and `pvp`, `migrations` and
    `netcompare` when the lab has a `[switch]`, `[[migrations]]`, or `[networks]` or
    addressed switch ports); `--only` overrides it."""

    repetitions: int | None = Field(default=None, ge=1, le=100)
    """Measured repetitions of every workload (median and spread are taken over them)."""

    warmup: int | None = Field(default=None, ge=0, le=10)
    """Unmeasured runs before the repetitions."""

    duration: float | None = Field(default=None, gt=0, le=3600)
    """Seconds each timed workload (sysbench, fio, iperf3) runs per repetition."""

    fio_size: str | None = Field(default=None, pattern=r"^\d+[kKmMgG]$")
    """fio file/region size per job (fio syntax: `64M`, `1G`; seed 000 used `1G`)."""

    fio_iodepth: int | None = Field(default=None, ge=1, le=1024)
    """fio I/O depth (seed 000: 128)."""

    iperf3_streams: int | None = Field(default=None, ge=1, le=128)
    """iperf3 parallel streams, `-P` (seed 004: 30)."""

    ping_count: int | None = Field(default=None, ge=1, le=1000)
    """Echo requests per ping repetition."""

    pvp: PvpSpec = PvpSpec()
    """The packet-rate benchmark through the lab's `[switch]` (`kvmlab run`, `--only pvp`)."""

    netcompare: NetCompareSpec = NetCompareSpec()
    """iperf3 and ping over every network path of the lab (`--only netcompare`)."""
