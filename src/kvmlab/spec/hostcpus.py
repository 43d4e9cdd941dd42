"""Host CPUs a lab names (pinning, the switch's cores, the tuning's isolated CPUs), and
which of them a given host lacks.

A lab file is often checked on one host and run on another (a colleague's laptop, CI, a
hardware host with 8+ CPUs), so whether the host has these CPUs is not a property of the
file: ``kvmlab check`` warns about it, and every command that pins, starts a switch or
tunes refuses before anything starts (:func:`kvmlab.runtime.hostcpus.check_host_cpus`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvmlab.spec.lab import Lab
from kvmlab.spec.units import format_cpuset

CpuUse = tuple[str, tuple[int, ...]]
"""(the key a user wrote, the host CPUs it names)."""


def guest_cpu_uses(lab: Lab, guests: Iterable[str] | None = None) -> list[CpuUse]:
    """Host CPUs the pinning of top-level ``guests`` names (None: every top-level guest).

    A guest inside a guest hypervisor pins to its hypervisor's vCPUs, not the host's:
    the kvmlab inside checks those."""
    names = list(lab.guests) if guests is None else list(guests)
    uses: list[CpuUse] = []
    for name in names:
        pinning = lab.guests[name].pinning
        for vcpu, cpus in pinning.vcpus.items():
            uses.append((f"guests.{name}.pinning.vcpus.{vcpu}", cpus))
        if pinning.emulator is not None:
            uses.append((f"guests.{name}.pinning.emulator", pinning.emulator))
    return uses


def switch_cpu_uses(lab: Lab) -> list[CpuUse]:
    """Host CPUs the lab's ``[switch]`` runs on."""
    if lab.switch is None:
        return []
    return [("switch.main_core", (lab.switch.main_core,)), ("switch.cores", lab.switch.cores)]


def tuning_cpu_uses(lab: Lab) -> list[CpuUse]:
    """Host CPUs ``[tuning] isolated`` names."""
    if lab.tuning is None or lab.tuning.isolated is None:
        return []
    return [("tuning.isolated", lab.tuning.isolated)]


def all_cpu_uses(lab: Lab) -> list[CpuUse]:
    """Every host CPU the lab names."""
    return [*guest_cpu_uses(lab), *switch_cpu_uses(lab), *tuning_cpu_uses(lab)]


def host_cpu_text(online: Sequence[int]) -> str:
    """``this host has 2 CPUs online (0-1)``."""
    count = f"{len(online)} CPU" if len(online) == 1 else f"{len(online)} CPUs"
    return f"this host has {count} online ({format_cpuset(tuple(online)) or 'none'})"


def missing_cpus(uses: Iterable[CpuUse], online: Sequence[int]) -> list[tuple[str, str]]:
    """(key, message) for each use naming a CPU that is not in ``online``."""
    have = set(online)
    found = []
    for key, cpus in uses:
        lacking = tuple(c for c in cpus if c not in have)
        if lacking:
            what = f"CPUs {format_cpuset(lacking)} are"
            if len(lacking) == 1:
                what = f"CPU {lacking[0]} is"
            found.append((key, f"{what} not on this host: {host_cpu_text(online)}"))
    return found
