"""Take a sampled host-side profile of a guest's QEMU where that QEMU runs.

A guest whose QEMU runs here is sampled here; a guest inside a guest hypervisor (L2 in L1)
is sampled inside it, by ``hostprof.sh`` through the hypervisor's agent (plain sh and perf
there, no Python: it starts slowly under TCG), and the output is parsed here. The guest's
own CPU is read through its agent before and after. What perf needs and lacks (perf
itself, a perf for the running kernel, permission) is an error with the exact fix.
"""

from __future__ import annotations

import subprocess
import time
from contextlib import suppress
from importlib import resources
from pathlib import Path

from kvmlab.errors import HostError, KvmlabError, ProcessFailure, RuntimeFailure, ToolMissing
from kvmlab.exits.collect import guest_hypervisor, guest_read, pid_arg, run_where, tracefs_name
from kvmlab.exits.cputime import proc_stat_busy
from kvmlab.exits.hostprof import HostProfile, build
from kvmlab.exits.tracepoints import check_run_args
from kvmlab.render.runfiles import AGENT_SOCKET
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord

RATE = 199
"""Samples a second per busy thread: 5 ms apart, off the 100/250/1000 Hz of timer ticks
(a rate in step with the tick would sample the tick's own work over and over)."""
NO_PROCESS, NO_PERF, RECORD_FAILED, NOT_PERMITTED, REPORT_FAILED = 3, 4, 5, 6, 7
"""hostprof.sh's exit statuses."""
PERF_SLACK = 300.0
"""Seconds beyond the window for perf to start, write and report (slower in a TCG L1)."""


def script() -> str:
    """The sampler's text (run with ``sh -c SCRIPT hostprof.sh ...``)."""
    return resources.files("kvmlab.exits").joinpath("hostprof.sh").read_text()


def run_argv(name: str, seconds: float, rate: int, pid: str) -> list[str]:
    """The command that samples QEMU process ``pid`` (``@FILE``: the pid in FILE)."""
    check_run_args(name, seconds, pid)
    return ["sh", "-c", script(), "hostprof.sh", "run", name, f"{seconds:g}", str(rate), pid]


def clean_argv(name: str, pid: str) -> list[str]:
    """The command that stops and removes what an interrupted run ``name`` left."""
    check_run_args(name, 1.0, pid)
    return ["sh", "-c", script(), "hostprof.sh", "clean", name, pid]


def record_command(pid: str, seconds: float, rate: int) -> str:
    """The perf command the profile comes from, as a person would type it."""
    target = pid if not pid.startswith("@") else f"$(cat {pid[1:]})"
    return (
        f"perf record -e cpu-clock -F {rate} -g -p {target} -- sleep {seconds:g}; "
        "perf kvm --host --guest report --stdio --children --sort pid,dso,sym -n -g none"
    )


def host_profile_guest(
    run_dir: Path,
    record: GuestRecord,
    seconds: float,
    rate: int = RATE,
    name: str | None = None,
) -> HostProfile:
    """The sampled profile of a running guest's QEMU over ``seconds``, where it runs."""
    address = "/".join([record.lab, *record.address])
    name = name or tracefs_name()
    guest = backends.attach(run_dir, record)
    hyper = guest_hypervisor(record, address) if record.via is not None else None
    if hyper is None and not guest.pid:
        raise RuntimeFailure(f"{address}: its QEMU's process is not on this host (no pid)")
    pid = pid_arg(record, guest)
    argv = run_argv(name, seconds, rate, pid)
    reachable = (run_dir / AGENT_SOCKET).exists()
    before = guest_read(guest)[0] if reachable else ""
    t0 = time.monotonic()
    try:
        code, out, err = run_where(argv, hyper, seconds + PERF_SLACK, "perf record")
    except BaseException:
        clean_up(name, pid, hyper)
        raise
    after = guest_read(guest)[0] if before else ""
    wall = time.monotonic() - t0
    if code != 0:
        clean_up(name, pid, hyper)
        raise run_failure(code, err.decode(errors="replace"), hyper, address, argv)
    where = "this host" if hyper is None else f"inside {record.lab}/{record.via}"
    profile = build(
        out.decode(errors="replace"),
        address,
        where,
        record.accel,
        seconds,
        rate,
        record_command(pid, seconds, rate),
    )
    if before and after:
        with suppress(ValueError):
            busy0, _ = proc_stat_busy(before)
            busy1, _ = proc_stat_busy(after)
            profile.guest_cpu = 100 * (busy1 - busy0) / wall if wall > 0 else None
            if wall > seconds * 1.5:
                profile.notes.append(
                    f"the guest's own CPU is its mean over the {wall:.0f} s around the window"
                )
    if not reachable:
        profile.notes.append("the guest's own CPU is unknown: it has no agent socket")
    if hyper is not None:
        profile.notes.append(f"sampled inside {record.lab}/{record.via}, where its QEMU runs")
    if not guest.is_alive():
        profile.partial = f"{address} stopped during the window"
    return profile


def clean_up(name: str, pid: str, hyper: Machine | None) -> None:
    """Stop the recorder and remove its directory (the script does this itself unless it
    was killed: a guest command interrupted by kvmlab is killed with SIGKILL, and so is
    a local one by ``subprocess.run``)."""
    argv = clean_argv(name, pid)
    with suppress(KvmlabError, OSError, subprocess.TimeoutExpired):
        if hyper is None:
            subprocess.run(argv, capture_output=True, check=False, timeout=60)
        else:
            hyper.exec(argv, timeout=120)


def run_failure(
    code: int | None, err: str, hyper: Machine | None, address: str, argv: list[str]
) -> KvmlabError:
    """The error for a failed run, with the exact fix where there is one."""
    lines = [line.removeprefix("kvmlab-hostprof: ") for line in err.splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit status {code}"
    where = "" if hyper is None else f" inside {hyper.config.name}"
    run_in = "" if hyper is None else f" (in {hyper.config.name}: kvmlab exec ADDRESS -- ...)"
    if code == NO_PROCESS:
        return RuntimeFailure(f"{address}: its QEMU is not running{where}: {last}")
    if code == NO_PERF:
        if last.startswith("perf is not installed"):
            return ToolMissing(f"perf{where}", "apt-get install linux-perf" + run_in)
        if last.startswith("nsenter"):
            return ToolMissing(f"nsenter{where}", "apt-get install util-linux" + run_in)
        return HostError(
            f"no perf for the running kernel{where}: {last}",
            [
                "install the perf that matches the kernel: apt-get install linux-perf "
                "(Debian), linux-tools-$(uname -r) (Ubuntu), perf (Fedora)" + run_in
            ],
        )
    if code == NOT_PERMITTED:
        return HostError(
            f"perf is not permitted to sample {address}'s QEMU{where}: {last}",
            [
                "run kvmlab as root",
                "or allow it: sysctl -w kernel.perf_event_paranoid=1 "
                "(kernel samples of your own processes; -1 for all)" + run_in,
            ],
        )
    what = {RECORD_FAILED: "perf record", REPORT_FAILED: "perf report"}.get(code or 0, "perf")
    shown = [*argv[:2], "<hostprof.sh>", *argv[3:]]
    return ProcessFailure(f"{what} failed{where}: {last}", shown, code, lines[-5:])
