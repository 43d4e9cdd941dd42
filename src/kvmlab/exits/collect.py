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

from kvmlab.errors import HostError, KvmlabError, ProcessFailure, StateError, ToolMissing
from kvmlab.exits import perfkvm, qstats, tracepoints
from kvmlab.exits.cputime import ThreadTimes, add_guest_side, cpu_window
from kvmlab.exits.model import Profile, from_json
from kvmlab.exits.pcimap import Region, iomem_regions, pci_regions
from kvmlab.render.runfiles import PID_FILE
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.nested import (
    INNER_RUN_ROOT,
    guest_env,
    hypervisor_of,
    inner_address,
    inner_failure,
    inner_path,
    kvmlab_argv,
)
from kvmlab.runtime.rundir import GuestRecord
from kvmlab.runtime.thread_cpu import read_threads

Provider = Literal["auto", "tracepoints", "counters", "perf"]
PROVIDERS: tuple[str, ...] = ("auto", "tracepoints", "counters", "perf")
TRACEFS = Path("/sys/kernel/tracing")


class NoExits(KvmlabError):
    """The guest has no VM exits to profile (it runs under TCG)."""

    exit_code = 4


def tracefs_name() -> str:
    """This run's tracefs instance (and synthetic event prefix): unique, an identifier."""
    return f"kvmlab_{os.getpid()}_{int(time.time() * 1000) % 100000}"


def profile_guest(
    run_dir: Path,
    record: GuestRecord,
    seconds: float,
    provider: Provider = "auto",
    name: str | None = None,
    guest_side: bool = True,
) -> Profile:
    """The exit profile of a running guest over ``seconds``.

    ``guest_side``: also read the guest's own CPU time and address map through its agent
    (off for the kvmlab inside a guest hypervisor, whose guests' agents are relayed to the
    level below, which reads them itself).
    """
    address = "/".join([record.lab, *record.address])
    name = name or tracefs_name()
    if record.via is None and record.accel != "kvm":
        raise NoExits(_tcg_reason(record, address))
    guest = backends.attach(run_dir, record)
    hyper = guest_hypervisor(record, address) if record.via is not None else None
    before = guest_read(guest) if guest_side else ("", "")
    t0 = time.monotonic()
    profile = None
    if provider == "perf":
        profile = perf_profile(address, pid_arg(record, guest), seconds, name, hyper)
    if provider in ("auto", "tracepoints"):
        regions = iomem_regions(before[1])
        if hyper is None and not regions and guest.capabilities.exit_counters:
            with suppress(KvmlabError):  # names only: tracing does not need QMP
                regions = pci_regions(guest.monitor().execute("query-pci"))
        profile = traced_profile(
            address, pid_arg(record, guest), seconds, name, hyper, provider == "auto", regions
        )
    if profile is None:
        profile = (
            _counted(address, guest, seconds)
            if hyper is None
            else _counted_inside(hyper, record, address, seconds)
        )
        if provider == "auto":
            profile.notes.append(
                "tracepoints unavailable where its KVM runs (no hist "
                "triggers or no tracefs access): counters only"
            )
    after = guest_read(guest) if guest_side and before[0] else ("", "")
    wall = time.monotonic() - t0
    if profile.cpu is not None and before[0] and after[0]:
        add_guest_side(profile.cpu, before[0], after[0], wall)
        if wall > profile.cpu.seconds * 1.5:
            profile.notes.append(f"guest CPU is its mean over the {wall:.0f} s around the window")
    if hyper is not None:
        profile.notes.append(f"taken inside {record.lab}/{record.via}, where its KVM runs")
    if not guest.is_alive():
        profile.partial = f"{address} stopped during the window"
    return profile


def guest_hypervisor(record: GuestRecord, address: str) -> Machine:
    """The guest hypervisor a nested guest runs in (its record at this level)."""
    hyper = hypervisor_of(record)
    if hyper is None:
        raise NoExits(f"{address}: its guest hypervisor {record.lab}/{record.via} is gone")
    return hyper


def pid_arg(record: GuestRecord, guest: Machine) -> str:
    """The QEMU process to trace: its pid here, or its pid file inside the hypervisor."""
    if record.via is None:
        return str(guest.pid or 0)
    return "@" + "/".join([INNER_RUN_ROOT, record.lab, *inner_path(record), PID_FILE])


def _tcg_reason(record: GuestRecord, address: str) -> str:
    why = f"{address} runs under TCG ({record.accel_reason}): TCG has no VM exits to profile"
    if record.children:
        why += f"; its own guests run under its KVM: kvmlab exits {address}/GUEST"
    return why


def guest_read(machine: Machine) -> tuple[str, str]:
    """The guest's ``/proc/stat`` and ``/proc/iomem`` ('' where unreadable)."""
    argv = ["sh", "-c", "cat /proc/stat; echo @@; cat /proc/iomem"]
    try:
        result = machine.exec(argv, timeout=120)
    except KvmlabError:
        return "", ""
    stat, _, iomem = result.stdout.decode(errors="replace").partition("@@\n")
    return (stat, iomem) if result.returncode == 0 else ("", "")


def traced_profile(
    address: str,
    pid: str,
    seconds: float,
    name: str,
    hyper: Machine | None,
    fallback: bool,
    regions: list[Region],
) -> Profile | None:
    """The tracepoint profile, taken here or inside ``hyper`` (plain sh there: no Python);
    None when ``fallback`` and tracing is unusable there."""
    argv = tracepoints.run_argv(name, seconds, pid)
    with _cleaned(name, hyper):
        code, out, err = run_where(argv, hyper, seconds + 120, "the VM-exit tracer")
    if code in (tracepoints.NO_HIST, tracepoints.NO_TRACEFS) and fallback:
        return None
    if code in (tracepoints.NO_HIST, tracepoints.NO_TRACEFS):
        lines = err.decode(errors="replace").splitlines()
        where = "" if hyper is None else f" inside {hyper.config.name}"
        raise HostError(
            f"tracepoints unavailable{where}: {lines[-1] if lines else code}",
            [
                "run as root with tracefs mounted (mount -t tracefs nodev "
                "/sys/kernel/tracing) and CONFIG_HIST_TRIGGERS",
                "or --provider counters",
            ],
        )
    if code != 0:
        where = "" if hyper is None else f" inside {hyper.config.name}"
        raise ProcessFailure(
            f"the VM-exit tracer failed{where}",
            ["trace.sh", "run", name, pid],
            code,
            err.decode(errors="replace").splitlines()[-5:],
        )
    return tracepoints.parse_output(out.decode(errors="replace"), address, seconds, regions)


def run_where(
    argv: list[str], hyper: Machine | None, timeout: float, what: str
) -> tuple[int | None, bytes, bytes]:
    """Exit status, stdout and stderr of ``argv`` run here, or inside ``hyper`` through its
    agent (whose guest is slower: twice the time)."""
    if hyper is None:
        proc = _run_here(argv, timeout, what)
        return proc.returncode, proc.stdout, proc.stderr
    result = hyper.exec(argv, timeout=2 * timeout)
    return result.returncode, result.stdout, result.stderr


@contextmanager
def _cleaned(name: str, hyper: Machine | None) -> Iterator[None]:
    """Leave tracefs as it was even when interrupted. The tracer's own EXIT trap cleans up
    when it ends; a guest command interrupted by kvmlab is killed with SIGKILL, so then the
    clean-up runs again from here (inside the hypervisor: only then, one agent call less)."""
    try:
        yield
    except BaseException:
        if hyper is not None:
            with suppress(KvmlabError):
                hyper.exec(tracepoints.clean_argv(name), timeout=120)
        raise
    finally:
        if hyper is None and (TRACEFS / "instances" / name).exists():
            with suppress(subprocess.TimeoutExpired):
                subprocess.run(
                    tracepoints.clean_argv(name), capture_output=True, check=False, timeout=60
                )


def perf_profile(
    address: str, pid: str, seconds: float, name: str, hyper: Machine | None
) -> Profile:
    """``perf kvm stat record`` of the guest's QEMU, where its KVM runs, and its reports."""
    argv = perfkvm.record_argv(pid, seconds, name)
    code, out, err = run_where(argv, hyper, seconds + 300, "perf kvm stat record")
    if code == 4:  # perf.sh: perf or nsenter missing where KVM runs
        raise ToolMissing(
            "perf" if hyper is None else f"perf inside {hyper.config.name}",
            "apt-get install linux-perf util-linux",
        )
    if code != 0:
        lines = err.decode(errors="replace").splitlines()
        why = f": {lines[-1]}" if lines else ""
        argv_shown = ["perf", "kvm", "stat", "record", "-p", pid]
        raise ProcessFailure(f"perf kvm stat record failed{why}", argv_shown, code, lines[-5:])
    profile = perfkvm.parse_report(out.decode(errors="replace"), address, seconds)
    profile.provider_note = "perf kvm stat record -p (every exit recorded, then reported)"
    return profile


def _run_here(argv: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[bytes]:
    """``argv`` run here; one that outlives ``timeout`` is a :class:`ProcessFailure`."""
    try:
        return subprocess.run(argv, capture_output=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ProcessFailure(
            f"{what} did not end within {timeout:g} s", argv[:2] + argv[3:], None
        ) from None


def _counted(address: str, machine: Machine, seconds: float) -> Profile:
    if not machine.capabilities.exit_counters:
        raise StateError(f"{machine.config.name} {machine.capabilities.refused}")
    pid = machine.pid or 0
    start = _thread_times(pid)
    profile = qstats.profile(address, machine.monitor().execute, seconds, time.sleep)
    profile.cpu = cpu_window(start, _thread_times(pid))
    return profile


def _thread_times(pid: int) -> ThreadTimes:
    """A snapshot of QEMU's threads read here (the same fields trace.sh prints)."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    threads = read_threads(pid)
    return ThreadTimes(
        uptime, {t.tid: (t.name, t.user, t.system, t.guest) for t in threads.values()}
    )


def _counted_inside(hyper: Machine, record: GuestRecord, address: str, seconds: float) -> Profile:
    """Counters of a nested guest: its QMP is inside the hypervisor, so the kvmlab there is
    asked (``kvmlab exits ... --provider counters -o json``)."""
    inner = inner_address(record)
    argv = kvmlab_argv(
        "exits",
        inner,
        "--seconds",
        f"{seconds:g}",
        "--provider",
        "counters",
        "--host-side-only",
        "-o",
        "json",
    )
    return asked_inside(
        hyper, argv, seconds, f"{address}: profiling it inside {record.via}", address, HostError
    )


def asked_inside(
    hyper: Machine,
    argv: list[str],
    seconds: float,
    what: str,
    address: str,
    no_exits: type[KvmlabError],
) -> Profile:
    """The exit profile the kvmlab inside ``hyper`` prints for ``argv`` (``kvmlab exits ...
    -o json``), named ``address``; its "no VM exits" answer raised as ``no_exits``, any
    other failure with its own error lines."""
    result = hyper.exec(argv, timeout=seconds + 600, env=guest_env())
    if result.returncode != 0:
        failure = inner_failure(result, argv, what)
        if result.returncode == NoExits.exit_code:
            raise no_exits(str(failure))
        raise failure
    try:
        profile = from_json(json.loads(result.stdout))
    except (ValueError, KeyError, TypeError) as exc:
        raise ProcessFailure(
            f"{what}: the kvmlab inside answered no exit profile ({exc})",
            argv,
            result.returncode,
        ) from None
    profile.address = address
    return profile
