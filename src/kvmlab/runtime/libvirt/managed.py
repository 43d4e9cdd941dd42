"""The libvirt domains running on this host, each proven a daemon's: a private daemon's
QEMUs by that daemon's own configuration directory, which only its mount namespace sees
(:func:`~kvmlab.runtime.libvirt.private.owned_processes`); the system daemon's by its pid
file in ``/run/libvirt/qemu``, when that process is a QEMU calling itself by the domain's
name. Read-only: no daemon is asked, no process signalled."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from kvmlab.errors import KvmlabError
from kvmlab.proc.processes import start_time
from kvmlab.proc.qemus import qemu_process
from kvmlab.runtime.machine import ManagedVm

SYSTEM_URI = "qemu:///system"
SYSTEM_PIDS = Path("/run/libvirt/qemu")
"""Where the system libvirtd's QEMU driver keeps each running domain's pid file."""


def system_domain_pid(name: str, pids: Path = SYSTEM_PIDS) -> int | None:
    """The pid the system libvirtd recorded for domain ``name``, when that process is a
    QEMU calling itself ``name``."""
    if not name or "/" in name or name.startswith("."):
        return None
    try:
        text = (pids / f"{name}.pid").read_text(errors="replace")[:32].strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    found = qemu_process(int(text))
    return found.pid if found is not None and found.name == name else None


def _system(pids: Path) -> list[ManagedVm]:
    out = []
    with suppress(OSError):
        for entry in sorted(pids.glob("*.pid")):
            name = entry.name[: -len(".pid")]
            pid = system_domain_pid(name, pids)
            started = start_time(pid) if pid is not None else None
            if pid is not None and started is not None:
                out.append(ManagedVm(pid, started, name, SYSTEM_URI))
    return out


def _private() -> list[ManagedVm]:
    from kvmlab.runtime.libvirt.private import PrivateDaemon, owned_processes, running

    out = []
    for daemon in running():
        if not isinstance(daemon, PrivateDaemon):
            continue
        with suppress(KvmlabError, OSError):
            for owned in owned_processes(daemon):
                found = qemu_process(owned.pid) if owned.program == "qemu" else None
                if found is not None and found.start == owned.started and found.name:
                    out.append(ManagedVm(owned.pid, owned.started, found.name, daemon.uri))
    return out


def managed_vms(pids: Path = SYSTEM_PIDS) -> list[ManagedVm]:
    """Every libvirt domain running on this host that kvmlab can prove is one."""
    return _private() + _system(pids)


AGENT_WAIT_S = 2
"""How long a domain's guest agent may take to answer ``ps --all`` (through its daemon)."""
BUSY = ("user", "nice", "system", "irq", "softirq", "steal")
"""The busy fields of ``guest-get-cpustats`` (milliseconds; ``guest`` is within ``user``)."""


def guest_busy_ms(vm: ManagedVm) -> float | None:
    """Domain ``vm``'s busy CPU time in ms over all its CPUs, as its guest agent reports it
    (``guest-get-cpustats`` through its daemon: read-only); None when no agent answers."""
    import json

    import libvirt
    import libvirt_qemu

    from kvmlab.runtime.libvirt.conn import connected

    command = json.dumps({"execute": "guest-get-cpustats"})
    with suppress(KvmlabError, libvirt.libvirtError, ValueError, KeyError, TypeError):
        with connected(vm.manager) as conn:
            dom = conn.lookupByName(vm.name)
            reply = libvirt_qemu.qemuAgentCommand(dom, command, AGENT_WAIT_S, 0)
        cpus = json.loads(reply)["return"]
        return float(sum(float(cpu.get(key, 0)) for cpu in cpus for key in BUSY))
    return None
