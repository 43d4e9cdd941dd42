"""What the commands ask of the host once: the accelerator choice and the CPU's virt flag."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kvmlab.host.accel import AccelChoice, choose_accel
from kvmlab.host.facts import cpu_info
from kvmlab.host.probe import HostProbe
from kvmlab.runtime.lab import HostAccel
from kvmlab.spec import Lab

if TYPE_CHECKING:
    from rich.console import Console


def host_accel() -> tuple[HostAccel, AccelChoice]:
    """``accel = "auto"`` on this host, with the vmx/svm flag guest hypervisors get."""
    from kvmlab.runtime.nested import OUTER_ACCEL_ENV

    probe = HostProbe(Path("/"))
    choice = choose_accel(probe=probe, outer=os.environ.get(OUTER_ACCEL_ENV))
    cpu = cpu_info(probe)
    flag = cpu.virt_flag if cpu is not None else None
    virt: Literal["vmx", "svm"] | None = "vmx" if flag == "vmx" else "svm" if flag else None
    return HostAccel(choice.accel, choice.reason, virt), choice


def print_nested_preflight(lab: Lab, choice: AccelChoice, console: Console) -> None:
    """The doctor's nested checks, before a lab with guest hypervisors starts.

    Findings that are not OK come with their fix; the last line says what the run will do.
    """
    from kvmlab.host.doctor import NESTED_CHECKS, run_checks
    from kvmlab.host.findings import Status

    if not any(guest.nested for _, guest in lab.walk()):
        return
    console.print("host checks for nested guests ('kvmlab doctor' runs them all):")
    for f in run_checks(checks=NESTED_CHECKS):
        style = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "red"}.get(f.status, "dim")
        console.print(f"  [{style}]{f.status.value.upper():4}[/] {f.id}: {f.summary}",
                      highlight=False)  # fmt: skip
        if f.status in (Status.WARN, Status.FAIL):
            for fix in f.fix:
                console.print(f"       [cyan]fix: {fix}[/]", highlight=False)
    if choice.accel == "kvm":
        console.print("  => L1 runs under KVM; each guest hypervisor says whether its own "
                      "guests get KVM", highlight=False)  # fmt: skip
    else:
        console.print(f"  => [yellow]L1 runs under {choice.accel.upper()}[/] ({choice.reason}); "
                      "its guests run under TCG too unless they set accel = \"kvm\" (KVM on "
                      "emulated SVM does not survive their I/O); every figure is labelled "
                      "with its level's accelerator", highlight=False)  # fmt: skip
