"""choose_accel: KVM only for usable /dev/kvm from kvm_intel/kvm_amd; TCG otherwise, saying why."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kvmlab.host.accel import AccelChoice, choose_accel

from .trees import AMD, INTEL, PVM


def test_intel_gives_kvm() -> None:
    assert choose_accel(INTEL) == AccelChoice(
        "kvm", "/dev/kvm is usable and kvm_intel is hardware KVM", "kvm_intel"
    )


def test_amd_gives_kvm() -> None:
    choice = choose_accel(AMD)
    assert (choice.accel, choice.flavour) == ("kvm", "kvm_amd")


def test_guest_hypervisor_under_tcg_with_several_vcpus_gives_its_guests_tcg() -> None:
    # An L1 on top of TCG has working kvm_amd, but with 2 vCPUs KVM there dies under L2 I/O.
    choice = choose_accel(AMD, outer="tcg", cpus=2)
    assert (choice.accel, choice.flavour) == ("tcg", "kvm_amd")
    assert "runs under TCG with 2 vCPUs" in choice.reason and 'accel = "kvm"' in choice.reason
    assert "when_tcg = { vcpus = 1 }" in choice.reason
    assert choose_accel(AMD, outer="tcg").accel == "tcg"  # CPU count unknown: the safe side
    assert choose_accel(AMD, outer="kvm", cpus=2).accel == "kvm"


def test_guest_hypervisor_under_tcg_with_one_vcpu_gives_its_guests_kvm() -> None:
    choice = choose_accel(AMD, outer="tcg", cpus=1)
    assert (choice.accel, choice.flavour) == ("kvm", "kvm_amd")
    assert "one vCPU" in choice.reason


def test_outer_tcg_does_not_hide_a_missing_dev_kvm(tree_copy: Callable[[Path], Path]) -> None:
    tree = tree_copy(AMD)
    (tree / "dev" / "kvm").unlink()
    assert "/dev/kvm is missing" in choose_accel(tree, outer="tcg").reason


def test_pvm_gives_tcg_and_says_why() -> None:
    choice = choose_accel(PVM)
    assert (choice.accel, choice.flavour) == ("tcg", "kvm_pvm")
    assert "kvm_pvm" in choice.reason
    assert "-accel tcg" in choice.reason


def test_no_dev_kvm_gives_tcg_with_the_fix(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / "dev/kvm").unlink()
    choice = choose_accel(root)
    assert choice.accel == "tcg"
    assert "/dev/kvm is missing" in choice.reason
    assert "modprobe kvm_intel" in choice.reason


def test_no_module_no_flags_points_at_firmware(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / "dev/kvm").unlink()
    for p in sorted((root / "sys/module/kvm_intel").rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    (root / "sys/module/kvm_intel").rmdir()
    cpuinfo = root / "proc/cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace(" vmx ", " "))
    choice = choose_accel(root)
    assert (choice.accel, choice.flavour) == ("tcg", "none")
    assert "firmware" in choice.reason


def test_unusable_dev_kvm_gives_tcg(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(AMD)
    (root / ".ioctl/KVM_GET_API_VERSION.txt").write_text("error: Permission denied\n")
    choice = choose_accel(root)
    assert choice.accel == "tcg"
    assert "Permission denied" in choice.reason
    assert "usermod -aG kvm" in choice.reason


def test_importing_accel_is_cheap() -> None:
    code = "import sys, kvmlab.host.accel; print('rich' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
