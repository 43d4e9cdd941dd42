"""What the commands ask of the host once: the accelerator choice and the CPU's virt flag."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from kvmlab.host.accel import AccelChoice, choose_accel
from kvmlab.host.facts import cpu_info
from kvmlab.host.probe import HostProbe
from kvmlab.runtime.lab import HostAccel


def host_accel() -> tuple[HostAccel, AccelChoice]:
    """``accel = "auto"`` on this host, with the vmx/svm flag guest hypervisors get."""
    probe = HostProbe(Path("/"))
    choice = choose_accel(probe=probe)
    cpu = cpu_info(probe)
    flag = cpu.virt_flag if cpu is not None else None
    virt: Literal["vmx", "svm"] | None = "vmx" if flag == "vmx" else "svm" if flag else None
    return HostAccel(choice.accel, choice.reason, virt), choice
