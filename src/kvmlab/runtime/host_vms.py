"""Every VM on this host and who runs it: kvmlab's own guests, the VMs other managers run
(libvirt's domains, through the backend registry), and any other QEMU. Read-only: nothing
here signals, pauses or asks anything of a VM.

Who runs a QEMU is proven, never guessed from its name: a kvmlab guest is the process its
record names (pid and start time); a manager's VM is what that manager's backend proves
(:attr:`kvmlab.runtime.machine.BackendKind.managed`); anything else is ``other``.
"""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass

from kvmlab.errors import KvmlabError
from kvmlab.proc.processes import cpu_seconds
from kvmlab.proc.qemus import QemuProcess, qemu_process, qemu_processes
from kvmlab.runtime import backends
from kvmlab.runtime.machine import ManagedVm

SYSTEM_URI = "qemu:///system"

__all__ = ["SYSTEM_URI", "HostVm", "QemuProcess", "domain_pid", "host_vms", "qemu_process"]


@dataclass(frozen=True)
class HostVm:
    """One QEMU on this host, with who runs it and how busy it keeps the host."""

    qemu: QemuProcess
    origin: str
    """``kvmlab``, ``libvirt`` or ``other``."""
    address: str | None = None
    """kvmlab's ``LAB/GUEST``, the manager's name for it; None for another QEMU."""
    manager: str | None = None
    """The manager that runs it (a libvirt URI)."""
    host_cpu_pct: float | None = None
    """Its host CPU (all threads) over the sampling window, in percent of one CPU."""
    guest_cpu_pct: float | None = None
    """Its guest's busy CPU over the window, in percent of one CPU, from its guest agent
    through its manager; None when none answers."""

    @property
    def target(self) -> str:
        """How commands that take a VM name it: ``LAB/GUEST``, ``domain:NAME``, ``pid:N``."""
        if self.origin == "kvmlab" and self.address:
            return self.address
        if self.origin == "libvirt" and self.address:
            return f"domain:{self.address}"
        return f"pid:{self.qemu.pid}"


def _kvmlab_pids() -> dict[int, tuple[int, str]]:
    """pid -> (start time, ``LAB/GUEST``) of kvmlab's guests running here."""
    from kvmlab.runtime.rundir import running_labs

    found: dict[int, tuple[int, str]] = {}
    for lab in running_labs():
        with suppress(KvmlabError, OSError):
            for entry in lab.entries():
                rec = entry.record
                if rec is None or rec.via is not None or rec.pid <= 0:
                    continue
                found[rec.pid] = (rec.pid_start or 0, entry.name)
    return found


def _managed() -> dict[int, ManagedVm]:
    found: dict[int, ManagedVm] = {}
    with suppress(KvmlabError, OSError):
        for vm in backends.managed_vms():
            found[vm.pid] = vm
    return found


def domain_pid(name: str, manager: str | None) -> int | None:
    """The QEMU pid of the running domain ``name`` (on ``manager``, else the system
    libvirtd), as its manager's backend proves it."""
    for vm in _managed().values():
        if vm.name == name and vm.manager == (manager or SYSTEM_URI):
            return vm.pid
    return None


def host_vms(sample_s: float = 0.5) -> list[HostVm]:
    """Every QEMU here with who runs it, its host CPU sampled over ``sample_s`` seconds
    (0: not sampled)."""
    qemus = qemu_processes()
    ours = _kvmlab_pids()
    managed = _managed()
    busy: dict[int, float | None] = {q.pid: None for q in qemus}
    domains = [m for m in managed.values() if m.pid in busy]
    guest: dict[int, float | None] = {}
    if sample_s > 0 and qemus:
        agents = {m.pid: _agent_sample(m) for m in domains}
        t0 = time.monotonic()
        before = {q.pid: cpu_seconds(q.pid) for q in qemus}
        time.sleep(sample_s)
        wall = time.monotonic() - t0
        for q in qemus:
            after, start = cpu_seconds(q.pid), before[q.pid]
            if start is not None and after is not None:
                busy[q.pid] = 100.0 * (after - start) / wall
        guest = {m.pid: _guest_pct(agents[m.pid], _agent_sample(m)) for m in domains}
    out = []
    for q in qemus:
        vm = managed.get(q.pid)
        if q.pid in ours and ours[q.pid][0] in (0, q.start):
            out.append(HostVm(q, "kvmlab", ours[q.pid][1], None, busy[q.pid]))
        elif vm is not None and vm.start == q.start:
            pct = guest.get(q.pid)
            out.append(HostVm(q, "libvirt", vm.name, vm.manager, busy[q.pid], pct))
        else:
            out.append(HostVm(q, "other", q.name, None, busy[q.pid]))
    return out


def _agent_sample(vm: ManagedVm) -> tuple[float, float] | None:
    """(when, busy ms) of ``vm``'s guest CPU from its agent, or None."""
    busy = backends.managed_guest_busy_ms(vm)
    return None if busy is None else (time.monotonic(), busy)


def _guest_pct(
    before: tuple[float, float] | None, after: tuple[float, float] | None
) -> float | None:
    """Guest CPU between two agent samples, in percent of one CPU."""
    if before is None or after is None or after[0] <= before[0] or after[1] < before[1]:
        return None
    return 100.0 * (after[1] - before[1]) / 1000.0 / (after[0] - before[0])
