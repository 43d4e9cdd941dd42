"""Refuse a lab that names host CPUs this host lacks, before anything starts."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kvmlab.errors import HostError
from kvmlab.host.facts import online_cpus
from kvmlab.host.probe import HostProbe
from kvmlab.spec.hostcpus import CpuUse, missing_cpus


def host_online_cpus(root: Path = Path("/")) -> list[int]:
    """This host's online CPUs (from sysfs)."""
    return online_cpus(HostProbe(root))


def check_host_cpus(lab_file: str, uses: Iterable[CpuUse], root: Path = Path("/")) -> None:
    """Raise :class:`HostError` naming every key whose CPUs this host lacks."""
    online = host_online_cpus(root)
    uses = list(uses)
    found = missing_cpus(uses, online)
    if not found:
        return
    where = "; ".join(f"{key}: {message}" for key, message in found)
    need = max(max(cpus) for _, cpus in uses if cpus) + 1
    raise HostError(
        f"{lab_file}: {where}; name CPUs this host has, or run the lab on a host with "
        f"{need} or more CPUs"
    )
