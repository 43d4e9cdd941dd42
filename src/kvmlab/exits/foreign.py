"""The exit profile of a VM kvmlab did not start: a QEMU by its pid (``pid:N``) or a
libvirt domain by its name (``domain:NAME``), with the providers that need nothing of the
VM (tracepoints, perf), never signalling, pausing or asking the VM anything.

KVM's counters come through QMP, which only the VM's own manager holds: they are refused
for such a VM, with the providers that work instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kvmlab.errors import KvmlabError, UsageError, printable
from kvmlab.exits.collect import (
    NoExits,
    Provider,
    asked_inside,
    perf_profile,
    run_where,
    traced_profile,
    tracefs_name,
)
from kvmlab.exits.hostprof import HostProfile, build
from kvmlab.exits.model import Profile
from kvmlab.runtime.host_vms import SYSTEM_URI, QemuProcess, domain_pid, qemu_process
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.nested import kvmlab_argv

PID_PREFIX = "pid:"
DOMAIN_PREFIX = "domain:"


@dataclass(frozen=True)
class ForeignTarget:
    """A VM named by ``pid:N`` or ``domain:NAME``, resolved to its QEMU process."""

    text: str
    qemu: QemuProcess

    @property
    def label(self) -> str:
        """``pid:4242 (win10)``: what reports call it."""
        name = f" ({self.qemu.name})" if self.qemu.name else ""
        return f"pid:{self.qemu.pid}{name}"


def is_foreign(text: str) -> bool:
    """Whether ``text`` names a VM kvmlab did not start (``pid:N``, ``domain:NAME``)."""
    return text.startswith((PID_PREFIX, DOMAIN_PREFIX))


def resolve(text: str, uri: str | None = None) -> ForeignTarget:
    """``pid:N`` or ``domain:NAME`` (on the system libvirtd, or ``uri``'s) as its QEMU."""
    if text.startswith(PID_PREFIX):
        raw = text[len(PID_PREFIX) :]
        if not raw.isdigit() or not 0 < int(raw) < 1 << 22:
            raise UsageError(f"{text!r}: a pid is a number (pid:4242); see kvmlab ps --all")
        found = qemu_process(int(raw))
        if found is None:
            raise UsageError(
                f"{text}: no QEMU runs as pid {int(raw)} here (gone, or another program); "
                "kvmlab ps --all lists every QEMU"
            )
        return _permitted(ForeignTarget(text, found))
    name = text[len(DOMAIN_PREFIX) :]
    pid = domain_pid(name, uri)
    found = qemu_process(pid) if pid is not None else None
    if found is None:
        where = uri or SYSTEM_URI
        raise UsageError(
            f"{text}: no running domain {name!r} on {where}; kvmlab ps --all lists every "
            "VM (a domain of another daemon: -c URI)"
        )
    return _permitted(ForeignTarget(text, found))


def _permitted(target: ForeignTarget) -> ForeignTarget:
    """``target``, when this user may profile it: root, or the QEMU's own user (tracefs and
    perf on another user's process need root)."""
    me = os.geteuid()
    if me != 0 and target.qemu.uid != me:
        raise UsageError(
            f"{target.label} is a QEMU of user {target.qemu.user}, not yours: profiling "
            "another user's VM needs root (run kvmlab as root, e.g. with sudo)"
        )
    return target


def profile_foreign(
    target: ForeignTarget, seconds: float, provider: Provider = "auto", name: str | None = None
) -> Profile:
    """The exit profile of ``target``'s QEMU over ``seconds``, taken here."""
    if target.qemu.accel != "kvm":
        raise NoExits(
            f"{target.label} runs under {target.qemu.accel} (it holds no KVM VM): TCG has no "
            "VM exits to profile; kvmlab exits --host-profile shows where its host CPU goes"
        )
    if provider == "counters":
        raise UsageError(
            f"{target.label}: KVM's counters come through the VM's QMP, which only its own "
            "manager holds; use --provider tracepoints or --provider perf"
        )
    name = name or tracefs_name()
    pid = str(target.qemu.pid)
    if provider == "perf":
        profile = perf_profile(target.label, pid, seconds, name, None)
    else:
        traced = traced_profile(target.label, pid, seconds, name, None, provider == "auto", [])
        if traced is None:
            raise NoExits(
                f"{target.label}: tracepoints unusable here (no hist triggers or no tracefs), "
                "and KVM's counters need the VM's QMP: use --provider perf"
            )
        profile = traced
    profile.notes.append(
        f"{target.label}: a VM kvmlab did not start, profiled from outside (read-only)"
    )
    return profile


def host_profile_foreign(target: ForeignTarget, seconds: float) -> HostProfile:
    """Where ``target``'s QEMU spends its host CPU over ``seconds`` (perf, sampled here);
    its guest's own CPU is unknown (kvmlab reaches no agent of a VM it did not start)."""
    from kvmlab.exits import sampling

    name = tracefs_name()
    pid = str(target.qemu.pid)
    argv = sampling.run_argv(name, seconds, sampling.RATE, pid)
    try:
        code, out, err = run_where(argv, None, seconds + sampling.PERF_SLACK, "perf record")
    except BaseException:
        sampling.clean_up(name, pid, None)
        raise
    if code != 0:
        sampling.clean_up(name, pid, None)
        raise sampling.run_failure(code, err.decode(errors="replace"), None, target.label, argv)
    profile = build(
        out.decode(errors="replace"),
        target.label,
        "this host",
        target.qemu.accel,
        seconds,
        sampling.RATE,
        sampling.record_command(pid, seconds, sampling.RATE),
    )
    profile.notes.append(
        "the guest's own CPU is unknown: a VM kvmlab did not start has no agent it can reach"
    )
    return profile


def profile_within(
    hyper: Machine, address: str, text: str, seconds: float, provider: Provider = "auto"
) -> Profile:
    """The exit profile of ``text`` (``pid:N``) inside guest hypervisor ``hyper`` (at
    ``address``): a QEMU kvmlab did not start, running under the KVM there, profiled by
    the kvmlab inside (``kvmlab exits pid:N -o json``), read-only as here."""
    if not text.startswith(PID_PREFIX):
        raise UsageError(
            f"--within {address} takes pid:N (a QEMU inside it; kvmlab ps --all run there "
            f"lists them: kvmlab exec {address} -- kvmlab ps --all)"
        )
    argv = kvmlab_argv(
        "exits", text, "--seconds", f"{seconds:g}", "--provider", provider, "-o", "json"
    )
    label = f"{text} inside {address}"
    profile = asked_inside(hyper, argv, seconds, f"{address}: profiling {text}", label, NoExits)
    profile.notes.append(f"taken inside {address}, where that QEMU's KVM runs")
    return profile


def argv_within(hyper: Machine, address: str, text: str) -> tuple[list[str], str]:
    """The command line of the QEMU ``text`` (``pid:N``) inside ``hyper``, read there
    (its ``/proc/N/cmdline``), or an empty list and why it could not be read (the diagnosis
    then assumes the rules' conditions)."""
    pid = text[len(PID_PREFIX) :]
    if not pid.isdigit():
        return [], f"{text} is not pid:N"
    where = f"/proc/{int(pid)}/cmdline inside {address}"
    try:
        done = hyper.exec(["cat", f"/proc/{int(pid)}/cmdline"], timeout=60)
    except KvmlabError as exc:
        return [], f"reading {where}: {printable(str(exc).splitlines()[0] if str(exc) else '')}"
    if done.returncode != 0 or done.truncated:
        said = printable(done.stderr.decode(errors="replace").strip()[-200:])
        cut = ", its output cut" if done.truncated else ""
        return [], f"reading {where}: exit status {done.returncode}{cut} {said}".rstrip()
    words = done.stdout.decode(errors="replace").split("\0")
    return (words[:-1] if words and words[-1] == "" else words), ""
