"""The workloads: the exact commands each runs at a level, and how their output is read.

Every workload is the same argv at L0 and in guests (only the disk target and the
address of the level below differ), so figures are comparable across levels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kvmlab.bench.executor import Place
from kvmlab.bench.parsers.fio import parse_fio
from kvmlab.bench.parsers.iperf3 import parse_iperf3
from kvmlab.bench.parsers.metric import Metric
from kvmlab.bench.parsers.ping import parse_ping
from kvmlab.bench.parsers.stress_ng import parse_stress_ng
from kvmlab.bench.parsers.sysbench import parse_sysbench_cpu, parse_sysbench_memory
from kvmlab.bench.suite import Settings

IPERF3_PORT = 5299


@dataclass(frozen=True)
class Step:
    """One command of a workload; its metrics are named ``<step>_<metric>`` (see :meth:`label`)."""

    name: str
    argv: list[str]
    parse: Callable[[str], list[Metric]]
    timeout: float
    keep: tuple[str, ...] = ()
    """Metric names to keep (empty: all the parser returns)."""
    server: list[str] | None = None
    """A server to start at the level below first (and stop after), e.g. ``iperf3 -s``."""
    scratch: bool = False
    """The step writes to ``Place.disk``: the runner provides and removes it at L0."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def label(self, metric: Metric) -> str:
        """The stored metric name: ``1thread_events_per_s``, ``randread_iops``."""
        if metric.name.startswith(self.name):
            return metric.name
        return f"{self.name}_{metric.name}"


def cpu(place: Place, s: Settings) -> list[Step]:
    """sysbench cpu on one thread and on every vCPU: events per second."""

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


def memory(place: Place, s: Settings) -> list[Step]:
    """sysbench memory: sequential 1 MiB-block bandwidth and random 4 KiB-block access rate."""

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


def disk(place: Place, s: Settings) -> list[Step]:
    """fio 4k random read, then write, direct I/O, libaio, the nested-KVM write-up's depth,
    numjobs = vCPUs.

    One fio run holds both jobs (``--stonewall``: write starts when read ended, each its own
    group): starting fio costs 18 s in a TCG-in-TCG L2 (measured), more than a job runs.
    """
    if place.disk is None:
        return []
    target = place.disk if place.disk.startswith("/dev/") else f"{place.disk}/fio.dat"
    argv = [
        "fio",
        "--bs=4k",
        "--direct=1",
        "--ioengine=libaio",
        f"--iodepth={s.fio_iodepth}",
        f"--numjobs={place.vcpus}",
        f"--size={s.fio_size}",
        f"--runtime={s.duration:g}",
        "--time_based",
        "--group_reporting",
        "--output-format=json",
        f"--filename={target}",
        "--name=randread",
        "--rw=randread",
        "--name=randwrite",
        "--rw=randwrite",
        "--stonewall",
    ]
    keep = tuple(
        f"{rw}_{metric}"
        for rw in ("randread", "randwrite")
        for metric in ("iops", "bandwidth_mib_s", "clat_p99_us")
    )
    # Step "rand": metric names starting with it are stored as they are (randread_iops).
    return [Step("rand", argv, parse_fio, 2 * s.duration + 120, keep=keep, scratch=True)]


def network(place: Place, s: Settings) -> list[Step]:
    """iperf3 to and from the level below (-P streams, JSON) and ping round trips to it."""
    if place.parent_addr is None:
        return []
    server = ["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(IPERF3_PORT)]
    host = place.parent_addr

    def iperf(name: str, reverse: bool) -> Step:
        argv = [
            "iperf3",
            "-c",
            host,
            "-p",
            str(IPERF3_PORT),
            "-P",
            str(s.iperf3_streams),
            "-t",
            f"{s.duration:g}",
            "--json",
            "--connect-timeout",
            "5000",
            *(["-R"] if reverse else []),
        ]
        return Step(
            name, argv, parse_iperf3, s.duration + 60, keep=("received_gbit_s",), server=server
        )

    ping_argv = ["ping", "-q", "-c", str(s.ping_count), "-i", "0.2", host]
    ping = Step(
        "ping", ping_argv, parse_ping, s.ping_count * 0.2 + 30, keep=("rtt_avg_ms", "rtt_mdev_ms")
    )
    return [iperf("to_parent", reverse=False), iperf("from_parent", reverse=True), ping]


def fork(place: Place, s: Settings) -> list[Step]:
    """stress-ng's fork stressor on every vCPU: processes created, run and reaped per second.

    Each fork builds an address space and each exit tears it down: page-table work, which
    shadow paging (a guest hypervisor without nested paging, as in the nested-paging talk)
    traps and nested paging does not. The YAML report goes to stdout (the table goes to
    stderr).
    """
    argv = [
        "stress-ng",
        "--fork",
        str(place.vcpus),
        "--timeout",
        f"{max(1, round(s.duration))}s",
        "--metrics-brief",
        "--yaml",
        "/proc/self/fd/1",  # stdout: guests have no /dev/stdout (udev makes that link)
    ]
    return [Step("fork", argv, parse_stress_ng, s.duration + 120, keep=("fork_bogo_ops_per_s",))]


def kbuild(place: Place, s: Settings) -> list[Step]:
    """A timed parallel build of Lua 5.4 from Debian's source package (see bench.kbuild)."""
    from kvmlab.bench.kbuild import kbuild_steps, prepare_source

    return kbuild_steps(place, s, prepare_source())


WORKLOADS: dict[str, Callable[[Place, Settings], list[Step]]] = {
    "cpu": cpu,
    "memory": memory,
    "disk": disk,
    "network": network,
    "kbuild": kbuild,
    "fork": fork,
}
"""Workloads that run commands; ``boot`` comes from the runtime's measured boot stages."""
