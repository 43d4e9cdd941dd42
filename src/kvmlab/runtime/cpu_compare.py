"""Host CPU of each QEMU process next to the CPU its guest reports (the host's ``top``
against the guest's, as in the idle-guest exit-storm write-up)."""

from __future__ import annotations

import time
from pathlib import Path

from kvmlab.errors import KvmlabError
from kvmlab.guest.agent import GuestAgent
from kvmlab.guest.errors import AgentError
from kvmlab.proc.processes import cpu_seconds
from kvmlab.render.runfiles import AGENT_SOCKET
from kvmlab.runtime import backends
from kvmlab.runtime.rundir import GuestRecord

Sample = tuple[float | None, tuple[int, int] | None]


def _agent(run_dir: Path, record: GuestRecord | None) -> GuestAgent:
    """The guest's agent, as its backend reaches it (without a record: its socket)."""
    if record is not None:
        return backends.attach(run_dir, record).agent()
    return GuestAgent(run_dir / AGENT_SOCKET)


def guest_cpu_ticks(run_dir: Path, record: GuestRecord | None = None) -> tuple[int, int] | None:
    """(busy, total) jiffies from the guest's /proc/stat, through the agent; None if unreachable."""
    try:
        with _agent(run_dir, record) as agent:
            agent.connect(timeout=1.0)
            result = agent.exec(["cat", "/proc/stat"], timeout=3.0)
    except (AgentError, KvmlabError):
        return None
    return parse_proc_stat(result.stdout.decode(errors="replace"))


def parse_proc_stat(text: str) -> tuple[int, int] | None:
    """(busy, total) of the aggregate ``cpu`` line; idle and iowait are not busy."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            total = sum(values[:8])  # guest and guest_nice are already in user and nice
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            return total - idle, total
    return None


def sample_usage(
    guests: list[tuple[Path, GuestRecord]], interval: float = 0.5
) -> dict[int, tuple[float | None, float | None]]:
    """pid -> (host CPU %, guest CPU %), both in % of one CPU, over ``interval`` seconds."""

    def take() -> dict[int, Sample]:
        return {rec.pid: (cpu_seconds(rec.pid), guest_cpu_ticks(d, rec)) for d, rec in guests}

    if not guests:
        return {}
    t0, first = time.monotonic(), take()
    time.sleep(interval)
    t1, second = time.monotonic(), take()
    usage: dict[int, tuple[float | None, float | None]] = {}
    for _, rec in guests:
        (h0, g0), (h1, g1) = first[rec.pid], second[rec.pid]
        host = None if h0 is None or h1 is None else 100 * (h1 - h0) / (t1 - t0)
        guest = None
        if g0 is not None and g1 is not None and g1[1] > g0[1]:
            guest = 100 * rec.vcpus * (g1[0] - g0[0]) / (g1[1] - g0[1])
        usage[rec.pid] = (host, guest)
    return usage
