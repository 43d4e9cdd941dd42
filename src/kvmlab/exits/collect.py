"""Take a guest's exit profile where its KVM runs, with the best provider there.

A guest whose QEMU runs here is profiled here. A guest inside a guest hypervisor (L2 in L1)
is profiled inside that hypervisor: the kvmlab there is asked, through the hypervisor's
agent, for the same profile (``kvmlab exits LAB/GUEST -o json``), which is how KVM's own
exits of L2 are reached. A guest under TCG has no VM exits at all, and is refused with
the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Literal

from kvmlab.errors import HostError, KvmlabError, ProcessFailure
from kvmlab.exits import qstats, tracepoints
from kvmlab.exits.cputime import ThreadTimes, add_guest_side, cpu_window
from kvmlab.exits.model import Profile, from_json
from kvmlab.exits.pcimap import Region, pci_regions
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.nested import guest_env, inner_failure, kvmlab_argv
from kvmlab.runtime.rundir import GuestRecord, LabDir

Provider = Literal["auto", "tracepoints", "counters"]
PROVIDERS: tuple[str, ...] = ("auto", "tracepoints", "counters")
TRACEFS = Path("/sys/kernel/tracing")


class NoExits(KvmlabError):
    """The guest has no VM exits to profile (it runs under TCG)."""

    exit_code = 4


def tracefs_name() -> str:
    """This run's tracefs instance (and synthetic event prefix): unique, an identifier."""
    return f"kvmlab_{os.getpid()}_{int(time.time() * 1000) % 100000}"


def profile_guest(
    run_dir: Path, record: GuestRecord, seconds: float, provider: Provider = "auto",
    name: str | None = None, guest_side: bool = True,
) -> Profile:  # fmt: skip
    """The exit profile of a running guest over ``seconds``.

    ``guest_side``: also read the guest's own CPU time through its agent (off inside a
    guest hypervisor, whose guests' agents are relayed to the level below).
    """
    address = "/".join([record.lab, *record.address])
    name = name or tracefs_name()
    if record.via is not None:
        return _inside(run_dir, record, address, seconds, provider, name)
    if record.accel != "kvm":
        raise NoExits(_tcg_reason(record, address))
    machine = Machine.attach(run_dir, record)
    pid = machine.pid or 0
    before, t0 = _guest_stat(machine) if guest_side else "", time.monotonic()
    if provider in ("auto", "tracepoints"):
        regions = pci_regions(machine.qmp().execute("query-pci"))
        profile = _traced(address, pid, seconds, name, provider == "auto", regions)
        if profile is None:
            profile = _counted(address, machine, pid, seconds)
            profile.notes.append("tracepoints unavailable here (no hist triggers or no "
                                 "tracefs access): counters only")  # fmt: skip
    else:
        profile = _counted(address, machine, pid, seconds)
    after, wall = _guest_stat(machine) if guest_side else "", time.monotonic() - t0
    if profile.cpu is not None and before and after:
        add_guest_side(profile.cpu, before, after, wall)
    if not machine.is_alive():
        profile.partial = f"{address} stopped during the window"
    return profile


def _tcg_reason(record: GuestRecord, address: str) -> str:
    why = f"{address} runs under TCG ({record.accel_reason}): TCG has no VM exits to profile"
    if record.children:
        why += f"; its own guests run under its KVM: kvmlab exits {address}/GUEST"
    return why


def _guest_stat(machine: Machine) -> str:
    try:
        result = machine.exec(["cat", "/proc/stat"], timeout=60)
    except KvmlabError:
        return ""
    return result.stdout.decode(errors="replace") if result.returncode == 0 else ""


def _traced(
    address: str, pid: int, seconds: float, name: str, fallback: bool, regions: list[Region]
) -> Profile | None:
    """The tracepoint profile taken here, or None when ``fallback`` and tracing is unusable."""
    argv = tracepoints.run_argv(name, seconds, pid)
    with _cleaned(name):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                              timeout=seconds + 120)  # fmt: skip
    if proc.returncode in (tracepoints.NO_HIST, tracepoints.NO_TRACEFS) and fallback:
        return None
    if proc.returncode != 0:
        raise ProcessFailure("the VM-exit tracer failed", ["trace.sh", "run", name],
                             proc.returncode, proc.stderr.splitlines()[-5:])  # fmt: skip
    return tracepoints.parse_output(proc.stdout, address, seconds, regions)


@contextmanager
def _cleaned(name: str) -> Iterator[None]:
    """Leave tracefs as it was even when interrupted (the tracer's own trap may not run)."""
    try:
        yield
    finally:
        if (TRACEFS / "instances" / name).exists():
            subprocess.run(tracepoints.clean_argv(name), capture_output=True, check=False,
                           timeout=60)  # fmt: skip


def _counted(address: str, machine: Machine, pid: int, seconds: float) -> Profile:
    start = _thread_times(pid)
    profile = qstats.profile(address, machine.qmp().execute, seconds, time.sleep)
    profile.cpu = cpu_window(start, _thread_times(pid))
    return profile


def _thread_times(pid: int) -> ThreadTimes:
    """A snapshot of QEMU's threads read here (the same fields trace.sh prints)."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            stat = (task / "stat").read_text()
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        lines.append(f"{task.name} {rest[11]} {rest[12]} {rest[40]} {comm}")
    uptime = Path("/proc/uptime").read_text().split()[0]
    return ThreadTimes.parse(f"{uptime} {os.sysconf('SC_CLK_TCK')}", "\n".join(lines))


def _inside(run_dir: Path, record: GuestRecord, address: str, seconds: float, provider: str,
            name: str) -> Profile:  # fmt: skip
    """Ask the kvmlab inside the guest hypervisor (where this guest's KVM runs).

    The guest's own CPU time is read here, through its relayed agent, around the whole
    call: the guest's CPU share is the mean over that longer span.
    """
    assert record.via is not None
    via = record.via.split("/")
    lab_dir = LabDir.of(record.lab)
    hyper_dir = lab_dir.guest_dir(via)
    hyper = next((e.record for e in lab_dir.entries() if list(e.address) == via), None)
    if hyper is None:
        raise NoExits(f"{address}: its guest hypervisor {record.lab}/{record.via} is gone")
    machine = Machine.attach(hyper_dir, hyper)
    inner = "/".join([record.lab, *record.address[len(via):]])
    argv = kvmlab_argv("exits", inner, "--seconds", f"{seconds:g}", "--provider", provider,
                       "--tracefs-name", name, "--host-side-only", "-o", "json")  # fmt: skip
    guest = Machine.attach(run_dir, record)
    before, t0 = _guest_stat(guest), time.monotonic()
    try:
        result = machine.exec(argv, timeout=seconds + 600, env=guest_env())
    except BaseException:
        with suppress(KvmlabError):  # the tracer inside was killed before its own cleanup
            machine.exec(tracepoints.clean_argv(name), timeout=120)
        raise
    if result.returncode != 0:
        failure = inner_failure(result, argv, f"{address}: profiling it inside {record.via}")
        if result.returncode == NoExits.exit_code:
            raise HostError(str(failure))
        raise failure
    profile = from_json(json.loads(result.stdout))
    after, wall = _guest_stat(guest), time.monotonic() - t0
    if profile.cpu is not None and before and after:
        add_guest_side(profile.cpu, before, after, wall)
        profile.notes.append(f"guest CPU is its mean over the {wall:.0f} s of the whole call")
    profile.address = address
    profile.notes.append(f"taken inside {record.lab}/{record.via}, where its KVM runs")
    return profile
