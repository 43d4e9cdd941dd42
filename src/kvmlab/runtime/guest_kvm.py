"""The KVM inside a running guest hypervisor, checked against its lab file before its
guests start: each module parameter asked for (given on its kernel command line, see
:mod:`kvmlab.spec.guest_kvm`) read back from its ``/sys/module``."""

from __future__ import annotations

from kvmlab.errors import RuntimeFailure, UsageError
from kvmlab.runtime.machine import Machine
from kvmlab.spec.guest_kvm import GuestKvm, module_parameters, parameter_value

MODULES = ("kvm_amd", "kvm_intel")


def check_guest_kvm(machine: Machine, kvm: GuestKvm) -> dict[str, str]:
    """What the KVM module inside ``machine`` shows for each parameter ``kvm`` asks for:
    ``{"kvm_amd.npt": "0", ...}``. One that did not take is a :class:`RuntimeFailure`
    naming what the guest's kernel shows."""
    name = machine.config.name
    present = _run(machine, ["ls", "/sys/module"], "listing its kernel modules").split()
    module = next((m for m in MODULES if m in present), None)
    if module is None:
        raise RuntimeFailure(
            f"{name}: no kvm_amd or kvm_intel module is loaded inside it, so its kvm.* "
            "settings cannot take (its KVM is not hardware-assisted)"
        )
    try:
        params = module_parameters(kvm, module)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None
    if not params:
        return {}
    files = [f"/sys/module/{module}/parameters/{k}" for k in params]
    lines = _run(machine, ["cat", *files], "reading its KVM parameters").splitlines()
    seen = {k: parameter_value(line) for k, line in zip(params, lines, strict=False)}
    wrong = [
        f"{k}={want} did not take (/sys/module/{module}/parameters/{k} reads "
        f"{seen.get(k, 'nothing')})"
        for k, want in params.items()
        if seen.get(k) != want
    ]
    if wrong:
        raise RuntimeFailure(f"{name}: {module} " + "; ".join(wrong))
    return {f"{module}.{k}": v for k, v in seen.items()}


def _run(machine: Machine, argv: list[str], what: str) -> str:
    result = machine.exec(argv, timeout=120)
    if result.returncode != 0:
        err = result.stderr.decode(errors="replace").strip()
        raise RuntimeFailure(
            f"{machine.config.name}: {what} failed ({' '.join(argv)}: exit "
            f"{result.returncode}{': ' + err if err else ''})"
        )
    return result.stdout.decode(errors="replace")
