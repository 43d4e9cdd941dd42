"""The read-back of a guest hypervisor's KVM parameters, against what a guest's kernel
answers (a stub guest: the real one is in tests/exits/test_exits_functional.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvmlab.errors import RuntimeFailure, UsageError
from kvmlab.guest.agent import ExecResult
from kvmlab.runtime.guest_kvm import check_guest_kvm
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
