"""The read-back of a guest hypervisor's KVM parameters, against what a guest's kernel
answers (a stub guest: the real one is in tests/exits/test_exits_functional.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kvmlab.errors import RuntimeFailure, UsageError
from kvmlab.guest.agent import ExecResult
from kvmlab.runtime.guest_kvm import (
    check_guest_kvm,
    check_host_kvm,
    describe,
    host_kvm_unmet,
    local_kvm,
    paging,
)
from kvmlab.spec.guest_kvm import GuestKvm


class Guest:
    """Answers ``ls /sys/module`` and ``cat`` of parameter files from a table."""

    def __init__(self, modules: str, params: dict[str, str]) -> None:
        self.config = SimpleNamespace(name="lab/l1")
        self.modules, self.params = modules, params

    def exec(self, argv: list[str], timeout: float = 0) -> ExecResult:
        if argv[:1] == ["ls"]:
            return ExecResult(0, self.modules.encode(), b"")
        lines = [self.params[path.rsplit("/", 1)[1]] for path in argv[1:]]
        return ExecResult(0, "".join(f"{x}\n" for x in lines).encode(), b"")


def test_what_took_is_returned_as_the_kernel_reads_it() -> None:
    guest = Guest("kvm\nkvm_amd\nvirtio", {"npt": "N", "nested": "1"})
    kvm = GuestKvm(nested_paging=False, nested=True)
    assert check_guest_kvm(guest, kvm) == {"kvm_amd.npt": "0", "kvm_amd.nested": "1"}  # type: ignore[arg-type]


def test_a_parameter_that_did_not_take_stops_the_run_with_what_it_reads() -> None:
    guest = Guest("kvm kvm_amd", {"avic": "N"})
    with pytest.raises(RuntimeFailure, match=r"kvm_amd avic=1 did not take .*reads 0\)"):
        check_guest_kvm(guest, GuestKvm(apic_virtualization=True))  # type: ignore[arg-type]


def test_no_hardware_kvm_module_or_a_key_of_the_other_vendor_is_refused() -> None:
    with pytest.raises(RuntimeFailure, match="no kvm_amd or kvm_intel module"):
        check_guest_kvm(Guest("kvm", {}), GuestKvm(nested=True))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"kvm\.vls is a kvm_amd parameter; .* kvm_intel"):
        check_guest_kvm(Guest("kvm_intel", {}), GuestKvm(vls=True))  # type: ignore[arg-type]


def _module(root: Path, module: str, params: dict[str, str]) -> Path:
    base = root / "sys/module" / module / "parameters"
    base.mkdir(parents=True)
    for name, value in params.items():
        (base / name).write_text(f"{value}\n")
    return root


def test_the_hosts_kvm_is_read_from_sys_module(tmp_path: Path) -> None:
    root = _module(tmp_path, "kvm_intel", {"ept": "Y", "nested": "N", "enable_shadow_vmcs": "Y"})
    have = local_kvm(root)
    assert have == {
        "kvm_intel.ept": "1",
        "kvm_intel.nested": "0",
        "kvm_intel.enable_shadow_vmcs": "1",
    }
    assert paging(have) == "nested paging (ept)"
    assert describe(have) == (
        "kvm_intel: ept=1, nested=0, enable_shadow_vmcs=1 (nested paging (ept))"
    )
    assert local_kvm(tmp_path / "nothing") == {}  # TCG, or kvm_pvm: no hardware module


def test_shadow_paging_is_named() -> None:
    assert paging({"kvm_amd.npt": "0", "kvm_amd.nested": "1"}) == "shadow paging (npt=0)"
    assert paging({}) == "" and describe({}) == ""


def test_a_host_requirement_names_what_the_host_has_and_the_command_it_takes() -> None:
    intel = {"kvm_intel.ept": "1", "kvm_intel.enable_shadow_vmcs": "1"}
    assert host_kvm_unmet(GuestKvm(nested_paging=True), intel) is None
    why = host_kvm_unmet(GuestKvm(nested_paging=False), intel)
    assert why is not None and "kvm_intel ept=0 (it has 1)" in why
    assert "modprobe -r kvm_intel && modprobe kvm_intel ept=0" in why
    amd = host_kvm_unmet(GuestKvm(vmcs_shadowing=False), {"kvm_amd.npt": "1"})
    assert amd == "needs kvm.vmcs_shadowing, a kvm_intel parameter, and this host's KVM is kvm_amd"
    none = host_kvm_unmet(GuestKvm(nested_paging=False), {})
    assert none is not None and none.startswith("needs hardware KVM on this host")
    assert "kvm_amd.npt=0 or kvm_intel.ept=0" in none
    assert host_kvm_unmet(GuestKvm(), {}) is None  # asks for nothing


def test_a_lab_whose_host_kvm_this_host_lacks_is_refused_before_anything(tmp_path: Path) -> None:
    from kvmlab.errors import HostError
    from kvmlab.spec import load_lab

    lab = tmp_path / "l.toml"
    lab.write_text('name = "l"\nhost_kvm = { nested_paging = false }\n[guests.vm]\n')
    with pytest.raises(HostError, match=r"host_kvm needs hardware KVM"):
        check_host_kvm(load_lab(lab), have={})
    with pytest.raises(HostError, match=r"host_kvm needs this host's kvm_amd npt=0 \(it has 1\)"):
        check_host_kvm(load_lab(lab), have={"kvm_amd.npt": "1"})
    check_host_kvm(load_lab(lab), have={"kvm_amd.npt": "0"})
