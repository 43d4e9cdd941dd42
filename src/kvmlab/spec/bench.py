"""The ``[bench]`` table of a lab: which workloads, how long, how often."""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import Field, field_validator

from kvmlab.spec.base import SpecModel
from kvmlab.spec.network import NetCompareSpec
from kvmlab.spec.switch import PvpSpec

WorkloadName = Literal[
    "cpu", "memory", "disk", "network", "boot", "kbuild", "fork", "pvp", "migrations", "netcompare"
]
"""What `[bench] workloads` and `--only` may name."""

SUITE_METRICS: dict[str, tuple[str, ...]] = {
    "cpu": ("1thread_events_per_s", "allcpus_events_per_s"),
    "memory": ("seq1m_bandwidth_mib_s", "rnd4k_ops_per_s"),
    "disk": tuple(
        f"{rw}_{metric}"
        for rw in ("randread", "randwrite")
        for metric in ("iops", "bandwidth_mib_s", "clat_p99_us")
    ),
    "network": (
        "to_parent_received_gbit_s",
        "from_parent_received_gbit_s",
        "ping_rtt_avg_ms",
        "ping_rtt_mdev_ms",
    ),
    "boot": ("qemu_s", "kernel_s", "init_s", "agent_s", "guest_s", "total_s"),
    "kbuild": ("build_elapsed_s",),
    "fork": ("fork_bogo_ops_per_s",),
}
"""The suite's workloads, in its order, with the metrics each stores.

The workloads are registered in ``kvmlab.bench.registry`` (spec imports no higher layer):
this table, :data:`WorkloadName` and :data:`EXITS` are spec's copy of the names and metrics
a lab file may mention, which tests/bench/test_registry.py holds equal to the registry."""

WORKLOADS: tuple[str, ...] = tuple(SUITE_METRICS)
"""The suite's workloads: the same commands at every level."""
LAB_WORKLOADS: tuple[str, ...] = tuple(w for w in get_args(WorkloadName) if w not in SUITE_METRICS)
"""Workloads of what a lab declares: PVP through its `[switch]`, its `[[migrations]]`, the
network paths between its guests (`[networks]`, addressed switch ports, user NICs)."""
EXITS = "exits"
"""The workload ``[bench] exit_profile`` stores (it is not named in a selection)."""

EXIT_KINDS: tuple[str, ...] = (
    "io",
    "msr_read",
    "msr_write",
    "msr",
    "npf",
    "mmio",
    "hlt",
    "pause",
    "external_interrupt",
    "interrupt_window",
    "nmi",
    "nmi_window",
    "cpuid",
    "hypercall",
    "preemption_timer",
    "exception",
    "cr_access",
    "dr_access",
    "apic",
    "invlpg",
    "xsetbv",
    "rdtsc",
    "rdpmc",
    "task_switch",
    "shutdown",
    "nested_virt",
    "other",
)
"""The kinds of VM exit (``kvmlab.exits.names.KINDS``): the ``exits`` workload stores
``all_per_s`` and ``KIND_per_s`` for the most frequent."""

MIGRATION_PREFIX = "migrate "
"""Migrations are stored as workload ``migrate NAME`` (``kvmlab.results.model``'s prefix)."""

MIGRATION_METRICS: tuple[str, ...] = (
    "total time",
    "QEMU downtime",
    "guest downtime",
    "network downtime",
    "probes lost",
    "packet-path downtime",
    "packet probes lost",
    "transferred",
    "dirty syncs",
    "verified",
)
"""What each ``migrate NAME`` stores (``kvmlab.migrate.compare.METRICS`` and the share
verified)."""

PVP_HOPS: tuple[str, ...] = (
    "sent",
    "switch in",
    "switch to guest",
    "guest in",
    "guest out",
    "switch from guest",
    "switch out",
    "received",
)
"""Where ``pvp`` counts packets (``kvmlab.net.pvp``): it stores ``FRAMEB HOP`` and
``FRAMEB HOP lost`` for each, ``FRAMEB loss`` and ``FRAMEB received per switch core``."""


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
    """fio file/region size per job (fio syntax: `64M`, `1G`; the nested-KVM write-up used
    `1G`)."""

    fio_iodepth: int | None = Field(default=None, ge=1, le=1024)
    """fio I/O depth (the nested-KVM write-up used 128)."""

    iperf3_streams: int | None = Field(default=None, ge=1, le=128)
    """iperf3 parallel streams, `-P` (the networking course lab used 30)."""

    ping_count: int | None = Field(default=None, ge=1, le=1000)
    """Echo requests per ping repetition."""

    headline: list[str] = Field(default=[], max_length=16)
    """Metrics the lab's configurations (it and its variants) are compared by, as
    `workload.metric` (`kbuild.build_elapsed_s`): `kvmlab run` prints a table of each, a
    row per configuration and a column per level (the by-configuration table of the
    nested-paging talk); empty: the first metric of each workload."""

    @field_validator("headline")
    @classmethod
    def _workload_dot_metric(cls, value: list[str]) -> list[str]:
        known = (*WORKLOADS, *LAB_WORKLOADS, EXITS)
        for item in value:
            workload, dot, metric = item.partition(".")
            named = workload in known or re.fullmatch(r"migrate [a-z0-9][a-z0-9-]*", workload)
            if not dot or not named or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_ >-]*", metric):
                raise ValueError(
                    f"{item!r}: each is workload.metric, a workload of {', '.join(known)} "
                    "(or 'migrate NAME') and one of its metrics, e.g. kbuild.build_elapsed_s"
                )
        return value

    exit_profile: float = Field(default=0, ge=0, le=600)
    """Seconds of VM-exit profile to take of every guest under KVM inside a guest
    hypervisor (L2), after its workloads, while stress-ng's fork stressor runs on each of
    its vCPUs (page-table work: nested paging barely exits for it, shadow paging traps
    it), stored as the run's `exits` rows (exits/s in all and for the most frequent
    reasons), shown beside each configuration in the by-configuration table. 0: none."""

    pvp: PvpSpec = PvpSpec()
    """The packet-rate benchmark through the lab's `[switch]` (`kvmlab run`, `--only pvp`)."""

    netcompare: NetCompareSpec = NetCompareSpec()
    """iperf3 and ping over every network path of the lab (`--only netcompare`)."""
