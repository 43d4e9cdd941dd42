"""What the commands ask of the host once: the accelerator choice and the CPU's virt flag."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kvmlab.host.accel import OUTER_ACCEL_ENV, AccelChoice, choose_accel
from kvmlab.host.facts import cpu_info
from kvmlab.host.probe import HostProbe
from kvmlab.runtime.hostaccel import HostAccel

if TYPE_CHECKING:
    from rich.console import Console

    from kvmlab.spec import Lab


def host_accel() -> tuple[HostAccel, AccelChoice]:
    """``accel = "auto"`` on this host, with the vmx/svm flag guest hypervisors get."""
    probe = HostProbe(Path("/"))
    choice = choose_accel(probe=probe, outer=os.environ.get(OUTER_ACCEL_ENV), cpus=os.cpu_count())
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
        console.print(
            f"  [{style}]{f.status.value.upper():4}[/] {f.id}: {f.summary}", highlight=False
        )
        if f.status in (Status.WARN, Status.FAIL):
            for fix in f.fix:
                console.print(f"       [cyan]fix: {fix}[/]", highlight=False)
    for line in nested_plan(lab, choice):
        console.print(f"  => {line}", highlight=False)


def nested_plan(lab: Lab, choice: AccelChoice) -> list[str]:
    """What the run will do with each guest hypervisor's guests, and the risks it takes."""
    if choice.accel == "kvm":
        return ["L1 runs under KVM; each guest hypervisor says whether its own guests get KVM"]
    lines = [f"L1 runs under {choice.accel.upper()} ({choice.reason})"]
    for path, guest in lab.walk():
        if len(path) != 1 or not guest.nested or not guest.guests:
            continue
        vcpus = guest.under(choice.accel).vcpus
        name = "/".join(path)
        for child, inner in guest.guests.items():
            if vcpus == 1:
                accel = "KVM" if inner.accel in ("auto", "kvm") else inner.accel.upper()
                lines.append(
                    f"{name}/{child} runs under {accel} inside {name} (one vCPU: "
                    "KVM on emulated SVM holds up under load there)"
                )
            elif inner.accel == "kvm":
                lines.append(
                    f"WARNING: {name}/{child} asks for KVM inside {name}, which has {vcpus} "
                    "vCPUs under TCG: L1 panics or soft-locks under L2's disk and network load "
                    f"(3 of 3 stress runs); fix: when_tcg = {{ vcpus = 1 }} on guests.{name}"
                )
            else:
                lines.append(
                    f"{name}/{child} runs under TCG inside {name} ({vcpus} vCPUs under "
                    "TCG; KVM there needs one: when_tcg = { vcpus = 1 })"
                )
    return lines
