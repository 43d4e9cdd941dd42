"""``kvmlab up``'s boot-stage table (kvmlab.runtime.boot_table) and the accelerator
``kvmlab render`` renders a nested guest for (kvmlab.runtime.render_target)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kvmlab.runtime.boot_table import boot_table
from kvmlab.runtime.hostaccel import HostAccel
from kvmlab.runtime.render_target import host_of


def machine(name: str, accel: str, boot: dict[str, float]) -> Any:
    return SimpleNamespace(config=SimpleNamespace(name=name, accel=accel), boot=boot)


def test_only_stages_some_guest_reached_are_columns_in_boot_order() -> None:
    machines = [
        machine("vm1", "kvm", {"total": 3.0, "qemu": 0.25}),
        machine("vm2", "tcg", {"agent": 1.5, "total": 9.125}),
    ]
    shown, rows = boot_table(machines)
    assert shown == ["qemu", "agent", "total"]
    assert rows == [["vm1", "kvm", "0.25", "-", "3.00"], ["vm2", "tcg", "-", "1.50", "9.12"]]


def test_no_machines_no_columns() -> None:
    assert boot_table([]) == ([], [])


def test_an_l1_guest_gets_this_host_and_a_nested_one_its_hypervisors_kvm() -> None:
    top = HostAccel("tcg", "no KVM here", None)
    assert host_of(("l1",), top) is top
    nested = host_of(("l1", "l2"), top)
    assert nested == HostAccel("kvm", "runs inside guest hypervisor l1, which exposes KVM", "svm")
    kvm = HostAccel("kvm", "here", "vmx")
    assert host_of(("l1", "l2"), kvm).virt_flag == "vmx"
