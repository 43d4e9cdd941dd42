"""The KVM inside a running guest hypervisor, checked against its lab file before its
guests start: each module parameter asked for (given on its kernel command line, see
:mod:`kvmlab.spec.guest_kvm`) read back from its ``/sys/module``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.errors import HostError, RuntimeFailure, UsageError
from kvmlab.runtime.machine import Machine
from kvmlab.spec.guest_kvm import (
    PARAMETERS,
    GuestKvm,
    kernel_parameters,
    module_parameters,
    parameter_value,
)

if TYPE_CHECKING:
    from kvmlab.spec import LoadedLab

MODULES = ("kvm_amd", "kvm_intel")


def local_kvm(root: Path = Path("/")) -> dict[str, str]:
    """This host's hardware KVM as its guests run under it: each parameter a lab's ``kvm``
    keys name, as ``/sys/module`` shows it (``{"kvm_amd.npt": "1", ...}``); empty without
    kvm_amd or kvm_intel (TCG, or a software KVM such as kvm_pvm)."""
    for module in MODULES:
        base = root / "sys/module" / module / "parameters"
        if not base.is_dir():
            continue
        names = [p[module] for p in PARAMETERS.values() if module in p]
        found = {}
        for name in names:
            try:
                found[f"{module}.{name}"] = parameter_value((base / name).read_text())
            except OSError:  # a parameter this kernel's module lacks
                continue
        return found
    return {}


def paging(params: dict[str, str]) -> str:
    """How guests under this KVM are paged: ``nested paging (npt)``, ``shadow paging
    (ept=0)``; empty when ``params`` does not say."""
    for key, value in params.items():
        if key.rpartition(".")[2] in ("npt", "ept"):
            name = key.rpartition(".")[2]
            return f"nested paging ({name})" if value == "1" else f"shadow paging ({name}=0)"
    return ""


def describe(params: dict[str, str]) -> str:
    """``kvm_amd: npt=0 (shadow paging), nested=1, avic=0``: one line for a report."""
    if not params:
        return ""
    module = next(iter(params)).partition(".")[0]
    shown = [f"{k.partition('.')[2]}={v}" for k, v in params.items()]
    mode = paging(params)
    return f"{module}: {', '.join(shown)}" + (f" ({mode})" if mode else "")


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


def host_kvm_unmet(kvm: GuestKvm, have: dict[str, str]) -> str | None:
    """Why this host's KVM (``have``, as :func:`local_kvm` reads it) is not what ``kvm``
    asks for, with the command that would make it so; None when it is. kvmlab never runs
    that command: reloading the host's KVM module stops every VM on it."""
    if not kvm.asked():
        return None
    if not have:
        wanted = " or ".join(kernel_parameters(kvm))
        return (
            f"needs hardware KVM on this host with {wanted} (this host has no kvm_amd or "
            "kvm_intel: its guests run under TCG)"
        )
    module = next(iter(have)).partition(".")[0]
    for key in kvm.asked():
        if module not in PARAMETERS[key]:
            return (
                f"needs kvm.{key}, a {' or '.join(PARAMETERS[key])} parameter, and this "
                f"host's KVM is {module}"
            )
    want = module_parameters(kvm, module)
    wrong = {k: v for k, v in want.items() if have.get(f"{module}.{k}") != v}
    if not wrong:
        return None
    shown = ", ".join(
        f"{k}={v} (it has {have.get(f'{module}.{k}', 'none')})" for k, v in wrong.items()
    )
    args = " ".join(f"{k}={v}" for k, v in want.items())
    return (
        f"needs this host's {module} {shown}; kvmlab never reloads the host's KVM: stop "
        f"every VM, then modprobe -r {module} && modprobe {module} {args}"
    )


def check_host_kvm(loaded: LoadedLab, have: dict[str, str] | None = None) -> None:
    """Refuse (:class:`HostError`, exit 4) a lab whose ``host_kvm`` this host's KVM (``have``:
    as :func:`local_kvm` reads it) does not have, before anything starts."""
    if loaded.lab.host_kvm is None:
        return
    why = host_kvm_unmet(loaded.lab.host_kvm, local_kvm() if have is None else have)
    if why is not None:
        shown = loaded.path if loaded.variant is None else f"{loaded.path} variant {loaded.variant}"
        raise HostError(f"{shown}: host_kvm {why}")
