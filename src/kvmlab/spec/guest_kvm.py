"""The KVM inside a guest hypervisor: the module parameters its guests run under."""

from __future__ import annotations

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from kvmlab.spec.base import SpecModel

PARAMETERS: dict[str, dict[str, str]] = {
    "nested_paging": {"kvm_amd": "npt", "kvm_intel": "ept"},
    "nested": {"kvm_amd": "nested", "kvm_intel": "nested"},
    "apic_virtualization": {"kvm_amd": "avic", "kvm_intel": "enable_apicv"},
    "vmcs_shadowing": {"kvm_intel": "enable_shadow_vmcs"},
    "vls": {"kvm_amd": "vls"},
    "vgif": {"kvm_amd": "vgif"},
}
"""Each key's module parameter, per KVM module (kvm_amd on AMD-V, kvm_intel on VT-x)."""


class GuestKvm(SpecModel):
    """The KVM inside this guest hypervisor (`nested = true`): its module parameters, given
    on its kernel command line (`kvm_amd.npt=0 kvm_intel.ept=0`: the module it loads takes
    its own) and read back from `/sys/module/MODULE/parameters` before its guests start: a
    parameter that did not take stops the run with what the guest's kernel shows. Unset keys
    keep the module's default."""

    nested_paging: bool | None = None
    """Two-dimensional paging for its guests (`kvm_amd npt`, `kvm_intel ept`); false makes
    them use shadow page tables (the nested-paging talk's slow rows)."""

    nested: bool | None = None
    """Whether its guests may run KVM themselves (`nested`)."""

    apic_virtualization: bool | None = None
    """AVIC (`kvm_amd avic`) or APICv (`kvm_intel enable_apicv`)."""

    vmcs_shadowing: bool | None = None
    """VMCS shadowing (`kvm_intel enable_shadow_vmcs`; VT-x only)."""

    vls: bool | None = None
    """Virtual VMLOAD/VMSAVE (`kvm_amd vls`; AMD-V only)."""

    vgif: bool | None = None
    """Virtual GIF (`kvm_amd vgif`; AMD-V only)."""

    @model_validator(mode="after")
    def _one_vendor(self) -> GuestKvm:
        asked = self.asked()
        intel = [k for k in asked if set(PARAMETERS[k]) == {"kvm_intel"}]
        amd = [k for k in asked if set(PARAMETERS[k]) == {"kvm_amd"}]
        if intel and amd:
            raise PydanticCustomError(
                "kvm_vendors",
                "{intel} (VT-x only, kvm_intel) and {amd} (AMD-V only, kvm_amd) cannot both "
                "apply: a CPU is one or the other, so one of them would stop the run; keep "
                "only the keys of the CPU the lab runs on",
                {"intel": " and ".join(intel), "amd": " and ".join(amd)},
            )
        return self

    def asked(self) -> dict[str, bool]:
        """The keys that are set, by name."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


def module_parameters(kvm: GuestKvm, module: str) -> dict[str, str]:
    """``kvm`` as ``module``'s parameters (``1``/``0``); a key that module lacks is a
    :class:`ValueError` naming it."""
    params = {}
    for key, value in kvm.asked().items():
        name = PARAMETERS[key].get(module)
        if name is None:
            has = " or ".join(PARAMETERS[key])
            raise ValueError(f"kvm.{key} is a {has} parameter; this guest's KVM is {module}")
        params[name] = "1" if value else "0"
    return params


def kernel_parameters(kvm: GuestKvm) -> list[str]:
    """``kvm`` as kernel command line words for every module that has each key."""
    return [
        f"{module}.{name}={'1' if value else '0'}"
        for key, value in kvm.asked().items()
        for module, name in PARAMETERS[key].items()
    ]


def parameter_value(text: str) -> str:
    """``/sys/module/*/parameters/*`` as ``1``/``0`` (bool parameters read ``Y``/``N``)."""
    value = text.strip()
    return {"Y": "1", "N": "0"}.get(value, value)
