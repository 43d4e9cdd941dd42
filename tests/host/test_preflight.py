"""The nested pre-flight ``kvmlab run``/``bench``/``up`` print: the doctor's nested checks."""

from __future__ import annotations

from rich.console import Console

from kvmlab.cli.hostinfo import print_nested_preflight
from kvmlab.host.accel import AccelChoice
from kvmlab.host.doctor import NESTED_CHECKS, run_checks
from kvmlab.spec.load import parse_lab

from .trees import INTEL, PVM

NESTED = b'name = "n"\n[guests.l1]\nnested = true\nmemory = "2G"\n[guests.l1.guests.l2]\n'
FLAT = b'name = "f"\n[guests.vm1]\n'


def _printed(lab: bytes, choice: AccelChoice) -> str:
    console = Console(record=True, width=200)
    print_nested_preflight(parse_lab(lab, "lab.toml"), choice, console)
    return console.export_text()


def test_nested_checks_are_the_doctors_virtualization_checks() -> None:
    ids = [f.id for f in run_checks(INTEL, checks=NESTED_CHECKS)]
    assert len(ids) == len(NESTED_CHECKS)
    assert {"kvm.nested", "kvm.ept_npt", "kvm.shadow_vmcs"} <= set(ids)
    nested = next(f for f in run_checks(INTEL, checks=NESTED_CHECKS) if f.id == "kvm.nested")
    assert nested.status.value == "warn" and nested.fix, "nested off comes with its fix"


def test_pvm_host_explains_tcg_at_l1() -> None:
    reasons = {f.id: f.summary for f in run_checks(PVM, checks=NESTED_CHECKS)}
    assert "kvm_pvm" in reasons["kvm.flavour"]


def test_preflight_printed_for_nested_labs_only() -> None:
    tcg = AccelChoice("tcg", "no hardware KVM here", "kvm_pvm")
    text = _printed(NESTED, tcg)
    assert "host checks for nested guests" in text and "kvm.nested" in text
    assert "=> L1 runs under TCG (no hardware KVM here)" in text
    assert "=> l1/l2 runs under KVM inside l1 (one vCPU" in text
    assert _printed(FLAT, tcg) == ""
    kvm = _printed(NESTED, AccelChoice("kvm", "hardware", "kvm_amd"))
    assert "=> L1 runs under KVM" in kvm


def test_a_multi_vcpu_guest_hypervisor_under_tcg_is_explained_or_warned() -> None:
    tcg = AccelChoice("tcg", "no hardware KVM here", "kvm_pvm")
    two = NESTED.replace(b'memory = "2G"', b'memory = "2G"\nvcpus = 2')
    assert "=> l1/l2 runs under TCG inside l1 (2 vCPUs under TCG" in _printed(two, tcg)
    forced = two + b'accel = "kvm"\n'
    text = _printed(forced, tcg)
    assert "WARNING: l1/l2 asks for KVM inside l1, which has 2 vCPUs under TCG" in text
    assert "fix: when_tcg = { vcpus = 1 } on guests.l1" in text
    fixed = forced.replace(b"vcpus = 2", b"vcpus = 2\nwhen_tcg = { vcpus = 1 }")
    assert "WARNING" not in _printed(fixed, tcg)
    kvm = AccelChoice("kvm", "hardware", "kvm_amd")
    assert "WARNING" not in _printed(forced, kvm)
