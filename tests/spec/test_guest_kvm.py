"""``kvm`` of a guest hypervisor: vendor-neutral keys as each KVM module's parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import load_lab
from kvmlab.spec.guest_kvm import GuestKvm, module_parameters, parameter_value

NESTED = """
name = "k"
[guests.l1]
nested = true
memory = "2G"
kvm = { nested_paging = false, nested = true }
[guests.l1.guests.l2]
memory = "512M"
"""


def test_nested_paging_is_npt_on_amd_and_ept_on_intel() -> None:
    kvm = GuestKvm(nested_paging=False, apic_virtualization=True)
    assert module_parameters(kvm, "kvm_amd") == {"npt": "0", "avic": "1"}
    assert module_parameters(kvm, "kvm_intel") == {"ept": "0", "enable_apicv": "1"}
    assert module_parameters(GuestKvm(), "kvm_amd") == {}


def test_a_key_the_module_lacks_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"kvm.vmcs_shadowing is a kvm_intel parameter"):
        module_parameters(GuestKvm(vmcs_shadowing=True), "kvm_amd")


def test_sys_module_values_read_as_one_or_zero() -> None:
    assert [parameter_value(v) for v in ("Y\n", "N", "1", "0\n")] == ["1", "0", "1", "0"]


def test_the_lab_key_loads_and_needs_a_guest_hypervisor(tmp_path: Path) -> None:
    lab = tmp_path / "k.toml"
    lab.write_text(NESTED)
    guest = load_lab(lab).lab.guests["l1"]
    assert guest.kvm is not None and guest.kvm.asked() == {"nested_paging": False, "nested": True}
    lab.write_text(NESTED.replace("nested = true\n", "", 1))
    with pytest.raises(SpecError, match="add nested = true"):
        load_lab(lab)
    lab.write_text(
        NESTED.replace(
            'memory = "2G"',
            'memory = "2G"\nboot = "disk"\ndisks = [{ path = "l1.qcow2", size = "1G" }]',
        )
    )
    with pytest.raises(SpecError, match="kernel command line"):
        load_lab(lab)
    lab.write_text(NESTED.replace("nested_paging = false", "paging = false"))
    with pytest.raises(SpecError, match="paging"):
        load_lab(lab)


def test_kernel_words_name_every_module_the_key_has() -> None:
    from kvmlab.spec.guest_kvm import kernel_parameters

    kvm = GuestKvm(nested_paging=False, vgif=True)
    assert kernel_parameters(kvm) == ["kvm_amd.npt=0", "kvm_intel.ept=0", "kvm_amd.vgif=1"]
