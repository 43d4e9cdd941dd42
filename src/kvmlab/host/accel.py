"""Choose the QEMU accelerator for guests on this host: KVM or TCG, and say why."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvmlab.host import facts
from kvmlab.host.probe import HostProbe

TCG_ARGS = "-accel tcg,thread=multi -cpu max"
OUTER_ACCEL_ENV = "KVMLAB_OUTER_ACCEL"
"""The accelerator the guest hypervisor runs under, set for the kvmlab inside it; its
``accel = "auto"`` takes it into account (``outer`` of :func:`choose_accel`)."""


@dataclass(frozen=True)
class AccelChoice:
    """``accel`` to pass to QEMU, the ``reason`` in one sentence, and the KVM ``flavour`` seen."""

    accel: Literal["kvm", "tcg"]
    reason: str
    flavour: facts.Flavour


OUTER_TCG_REASON = (
    "this guest hypervisor runs under TCG with {cpus} vCPUs: KVM inside it does not survive "
    "its guests' disk and network load (QEMU's emulated SVM loses interrupts between its "
    "vCPUs around #VMEXIT: L1 panics after VMRUN or soft-locks; 3 of 3 stress runs), so its "
    "guests run under TCG; give it one vCPU under TCG (when_tcg = {{ vcpus = 1 }}) for KVM, "
    'or set accel = "kvm" on its guests to force it'
)
OUTER_TCG_ONE_VCPU_REASON = (
    "this guest hypervisor runs under TCG with one vCPU, where its KVM survives its guests' "
    "disk and network load (6 of 6 stress runs, against 3 of 3 failures with 2 vCPUs): "
    "KVM in L1 boots L2 ~4x faster and runs it 4-16x faster than TCG-in-TCG"
)


def choose_accel(
    root: Path = Path("/"),
    probe: HostProbe | None = None,
    outer: str | None = None,
    cpus: int | None = None,
) -> AccelChoice:
    """KVM only when /dev/kvm is usable and comes from hardware KVM (kvm_intel/kvm_amd).

    kvm_pvm (software nested KVM) gives TCG: stock guest kernels take minutes to
    boot under it. No usable /dev/kvm gives TCG with the way to fix it. ``outer`` is the
    accelerator this host itself runs under when it is a kvmlab guest hypervisor: KVM on
    top of TCG is not stable enough for measurements (see :data:`OUTER_TCG_REASON`).
    """
    probe = probe if probe is not None else HostProbe(root)
    flavour = facts.kvm_flavour(probe)
    if flavour == "kvm_pvm":
        return AccelChoice(
            "tcg",
            "kvm_pvm is loaded: /dev/kvm is PVM (software nested KVM), under which stock guest "
            f"kernels take minutes to boot, so guests run under TCG ({TCG_ARGS})",
            flavour,
        )
    module = flavour if flavour != "none" else facts.vendor_module(facts.cpu_info(probe))
    if not probe.exists("/dev/kvm"):
        how = f"load it with 'modprobe {module}'" if module else "no KVM module fits this CPU"
        cpu = facts.cpu_info(probe)
        if cpu is not None and cpu.virt_flag is None:
            how = "enable VT-x/AMD-V in the firmware, or -cpu host on the L0 host if this is a VM"
        return AccelChoice("tcg", f"/dev/kvm is missing ({how}); guests run under TCG", flavour)
    access = probe.kvm_access()
    if access.error is not None:
        how = (
            " (add yourself to the kvm group: usermod -aG kvm $USER)"
            if ("denied" in access.error)
            else ""
        )
        return AccelChoice(
            "tcg", f"/dev/kvm cannot be used: {access.error}{how}; guests run under TCG", flavour
        )
    if access.verified and not access.usable:
        return AccelChoice(
            "tcg", f"/dev/kvm answers KVM API version {access.api_version}, not 12", flavour
        )
    if flavour == "none":
        return AccelChoice(
            "tcg",
            f"/dev/kvm exists but no kvm_intel or kvm_amd module is loaded (modprobe {module})"
            if module
            else "/dev/kvm exists but no kvm_intel or kvm_amd module is loaded",
            flavour,
        )
    if outer == "tcg" and cpus != 1:
        return AccelChoice("tcg", OUTER_TCG_REASON.format(cpus=cpus or "several"), flavour)
    if outer == "tcg":
        return AccelChoice("kvm", OUTER_TCG_ONE_VCPU_REASON, flavour)
    return AccelChoice("kvm", f"/dev/kvm is usable and {flavour} is hardware KVM", flavour)
