"""The probe and the parsers: recorded trees, command slugs, cpulists, cmdline, mounts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kvmlab.host import facts
from kvmlab.host.checks_memory import hugetlbfs_mounts
from kvmlab.host.doctor import run_checks
from kvmlab.host.probe import HostProbe, command_slug

from .trees import AMD, INTEL, PVM


def test_recorded_tree_runs_no_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a command ran under a recorded tree")

    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    for tree in (INTEL, AMD, PVM):
        probe = HostProbe(tree)
        assert not probe.live
        run_checks(tree, probe=probe)


def test_live_only_at_slash(tmp_path: Path) -> None:
    assert HostProbe(Path("/")).live
    assert not HostProbe(tmp_path).live


def test_recorded_commands(tmp_path: Path) -> None:
    (tmp_path / ".commands").mkdir()
    (tmp_path / ".commands/tool_--version.txt").write_text("tool 1.2\n")
    (tmp_path / ".commands/bad_--version.txt").write_text("oops\n")
    (tmp_path / ".commands/bad_--version.rc").write_text("2\n")
    probe = HostProbe(tmp_path)
    good = probe.run(["tool", "--version"])
    assert (good.found, good.returncode, good.first_line, good.ok) == (True, 0, "tool 1.2", True)
    bad = probe.run(["bad", "--version"])
    assert (bad.found, bad.returncode, bad.ok) == (True, 2, False)
    missing = probe.run(["nothing", "--version"])
    assert (missing.found, missing.ok) == (False, False)


def test_command_slug() -> None:
    assert command_slug(["qemu-system-x86_64", "--version"]) == "qemu-system-x86_64_--version"
    assert (
        command_slug(["/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk", "--version"])
        == "_usr_lib_openvswitch-switch-dpdk_ovs-vswitchd-dpdk_--version"
    )


def test_kvm_access_recorded(tmp_path: Path) -> None:
    assert not HostProbe(tmp_path).kvm_access().verified
    (tmp_path / ".ioctl").mkdir()
    record = tmp_path / ".ioctl/KVM_GET_API_VERSION.txt"
    record.write_text("12\n")
    assert HostProbe(tmp_path).kvm_access().usable
    record.write_text("garbage\n")
    access = HostProbe(tmp_path).kvm_access()
    assert access.verified and not access.usable and access.error


def test_listdir_hides_dot_entries_and_tolerates_missing() -> None:
    probe = HostProbe(INTEL)
    assert probe.listdir("/sys/class/iommu") == []
    assert probe.listdir("/no/such/dir") == []
    assert HostProbe(AMD).listdir("/sys/class/iommu") == ["ivhd0", "ivhd1"]


def test_which_in_recorded_tree() -> None:
    assert HostProbe(AMD).which("dpdk-testpmd") == "/usr/bin/dpdk-testpmd"
    assert HostProbe(INTEL).which("dpdk-testpmd") is None


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0-3,8", [0, 1, 2, 3, 8]),
        ("managed_irq,domain,2-4", [2, 3, 4]),
        ("", []),
        ("5\n", [5]),
    ],
)
def test_parse_cpulist(text: str, cpus: list[int]) -> None:
    assert facts.parse_cpulist(text) == cpus


def test_format_cpulist() -> None:
    assert facts.format_cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert facts.format_cpulist([]) == ""


def test_cmdline_stops_at_init_arguments(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cmdline").write_text("ro iommu=pt nomodule -- isolcpus=1 --foo\n")
    params = facts.cmdline_params(HostProbe(tmp_path))
    assert params == {"ro": "", "iommu": "pt", "nomodule": ""}


def test_cpu_info_and_flavour() -> None:
    intel = facts.cpu_info(HostProbe(INTEL))
    assert intel is not None and intel.is_intel and intel.virt_flag == "vmx"
    assert "shadow_vmcs" in intel.vmx_flags and intel.has("ept")
    pvm = facts.cpu_info(HostProbe(PVM))
    assert pvm is not None and pvm.is_amd and pvm.virt_flag is None and pvm.under_hypervisor
    assert facts.kvm_flavour(HostProbe(INTEL)) == "kvm_intel"
    assert facts.kvm_flavour(HostProbe(AMD)) == "kvm_amd"
    assert facts.kvm_flavour(HostProbe(PVM)) == "kvm_pvm"


def test_hugetlbfs_pagesize_parsing() -> None:
    assert hugetlbfs_mounts(HostProbe(AMD)) == {1024 * 1024: ["/dev/hugepages"]}
    assert hugetlbfs_mounts(HostProbe(INTEL)) == {2048: ["/dev/hugepages"]}


@pytest.mark.parametrize(
    ("value", "on"),
    [("Y", True), ("1", True), ("N", False), ("0", False), ("weird", None), (None, None)],
)
def test_is_on(value: str | None, on: bool | None) -> None:
    assert facts.is_on(value) is on
