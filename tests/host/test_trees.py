"""The doctor's findings on the three recorded hosts: Intel nested off, AMD nested on, PVM."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kvmlab.host.doctor import CHECKS, run_check, run_checks
from kvmlab.host.findings import Finding, Status
from kvmlab.host.output import exit_status
from kvmlab.host.probe import HostProbe

from .trees import AMD, INTEL, PVM, TREES, by_id, statuses

ALL_IDS = [
    "cpu.vendor",
    "cpu.virt",
    "kvm.dev",
    "kvm.flavour",
    "kvm.nested",
    "kvm.ept_npt",
    "kvm.shadow_vmcs",
    "kvm.apic_virt",
    "kvm.unrestricted_guest",
    "mem.hugepages_2m",
    "mem.hugepages_1g",
    "cpu.isolation",
    "cpu.nmi_watchdog",
    "io.iommu",
    "io.tun",
    "io.vhost_net",
    "trace.kvm",
    "tools.qemu",
    "tools.qemu_migration",
    "tools.libvirt",
    "tools.dpdk",
    "tools.ovs",
    "tools.fio",
    "tools.iperf3",
    "tools.perf",
    "tools.sysbench",
    "tools.stress-ng",
]

INTEL_NESTED_FIX = (
    "modprobe -r kvm_intel   # stop running VMs first",
    "echo 'options kvm-intel nested=1' >> /etc/modprobe.d/kvm.conf",
    "modprobe kvm_intel",
    "cat /sys/module/kvm_intel/parameters/nested",
)


@pytest.mark.parametrize("tree", TREES, ids=lambda p: p.name)
def test_every_tree_reports_every_check_in_order(tree: Path) -> None:
    findings = run_checks(tree)
    assert [f.id for f in findings] == ALL_IDS
    for f in findings:
        assert f.summary and "\n" not in f.summary
        assert all(e.source and e.value for e in f.evidence), f.id
        assert all(line.strip() for line in f.fix), f.id


def test_intel_nested_off() -> None:
    found = by_id(run_checks(INTEL))
    assert statuses(list(found.values())) == {
        "cpu.vendor": "info",
        "cpu.virt": "ok",
        "kvm.dev": "ok",
        "kvm.flavour": "ok",
        "kvm.nested": "warn",
        "kvm.ept_npt": "ok",
        "kvm.shadow_vmcs": "ok",
        "kvm.apic_virt": "ok",
        "kvm.unrestricted_guest": "ok",
        "mem.hugepages_2m": "info",
        "mem.hugepages_1g": "info",
        "cpu.isolation": "info",
        "cpu.nmi_watchdog": "info",
        "io.iommu": "info",
        "io.tun": "ok",
        "io.vhost_net": "ok",
        "trace.kvm": "ok",
        "tools.qemu": "ok",
        "tools.qemu_migration": "warn",
        "tools.libvirt": "ok",
        "tools.dpdk": "info",
        "tools.ovs": "info",
        "tools.fio": "ok",
        "tools.iperf3": "info",
        "tools.perf": "ok",
        "tools.sysbench": "info",
        "tools.stress-ng": "info",
    }
    nested = found["kvm.nested"]
    assert nested.fix == INTEL_NESTED_FIX
    assert [(e.source, e.value) for e in nested.evidence] == [
        ("/sys/module/kvm_intel/parameters/nested", "N")
    ]
    assert "off" in nested.summary
    assert "kvm_intel" in found["kvm.flavour"].summary
    assert found["kvm.ept_npt"].evidence[0].value == "Y"
    assert found["kvm.shadow_vmcs"].evidence[0].source.endswith("enable_shadow_vmcs")
    # 2M pages: none reserved, but systemd's /dev/hugepages is mounted, so no mount fix.
    assert found["mem.hugepages_2m"].fix == (
        "echo 1024 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
    )
    assert any("hugepagesz=1G" in line for line in found["mem.hugepages_1g"].fix)
    assert found["io.iommu"].fix[0].startswith("intel_iommu=on iommu=pt")
    assert found["cpu.isolation"].fix[0].startswith("isolcpus=2-15 nohz_full=2-15 rcu_nocbs=2-15")
    assert found["tools.qemu"].summary.startswith("QEMU 7.2.9")
    assert found["tools.sysbench"].fix == ("apt-get install -y sysbench",)
    assert found["tools.dpdk"].fix == ("apt-get install -y dpdk-dev",)
    assert exit_status(list(found.values())) == 0


def test_amd_nested_on() -> None:
    found = by_id(run_checks(AMD))
    assert statuses(list(found.values())) == {
        "cpu.vendor": "info",
        "cpu.virt": "ok",
        "kvm.dev": "ok",
        "kvm.flavour": "ok",
        "kvm.nested": "ok",
        "kvm.ept_npt": "ok",
        "kvm.shadow_vmcs": "skip",
        "kvm.apic_virt": "info",
        "kvm.unrestricted_guest": "skip",
        "mem.hugepages_2m": "info",
        "mem.hugepages_1g": "ok",
        "cpu.isolation": "ok",
        "cpu.nmi_watchdog": "ok",
        "io.iommu": "ok",
        "io.tun": "ok",
        "io.vhost_net": "ok",
        "trace.kvm": "ok",
        "tools.qemu": "ok",
        "tools.qemu_migration": "ok",
        "tools.libvirt": "ok",
        "tools.dpdk": "ok",
        "tools.ovs": "ok",
        "tools.fio": "ok",
        "tools.iperf3": "ok",
        "tools.perf": "ok",
        "tools.sysbench": "ok",
        "tools.stress-ng": "ok",
    }
    assert found["kvm.nested"].fix == ()
    assert ("/etc/modprobe.d/kvm.conf", "options kvm-amd nested=1") in [
        (e.source, e.value) for e in found["kvm.nested"].evidence
    ]
    assert "NPT" in found["kvm.ept_npt"].summary
    # AVIC off: a reload fix that adds a second options line for kvm-amd.
    assert "echo 'options kvm-amd avic=1' >> /etc/modprobe.d/kvm.conf" in found["kvm.apic_virt"].fix
    assert "6 of 8 1G hugepages free" in found["mem.hugepages_1g"].summary
    # /dev/hugepages is the 1G mount here, so 2M pages get their own mount point.
    assert found["mem.hugepages_2m"].fix[-1].endswith("/dev/hugepages2M")
    assert "iommu=pt" in found["io.iommu"].summary
    assert "ivhd0" in found["io.iommu"].summary
    assert "isolcpus=4-15" in found["cpu.isolation"].summary
    assert found["tools.ovs"].summary == "Open vSwitch 3.1.0 with DPDK 22.11.7"
    assert found["tools.dpdk"].summary == "DPDK 22.11.7"
    assert found["tools.qemu"].summary.startswith("QEMU 10.0.2")
    assert exit_status(list(found.values())) == 0


def test_pvm_host_recorded_here() -> None:
    found = by_id(run_checks(PVM))
    assert found["kvm.flavour"].status is Status.WARN
    assert "kvm_pvm" in found["kvm.flavour"].summary
    assert "TCG" in found["kvm.flavour"].summary
    assert found["cpu.virt"].status is Status.WARN
    assert found["kvm.dev"].status is Status.OK
    for check_id in (
        "kvm.nested",
        "kvm.ept_npt",
        "kvm.shadow_vmcs",
        "kvm.apic_virt",
        "kvm.unrestricted_guest",
    ):
        assert found[check_id].status is Status.SKIP, check_id
    assert "kvm_pvm" in found["kvm.nested"].summary
    trace = found["trace.kvm"]
    assert trace.status is Status.WARN
    assert trace.fix == ("mount -t tracefs nodev /sys/kernel/tracing",)
    assert "kvm_exit" in trace.summary
    # The host boots with nomodule: modprobe vhost_net cannot help, so no fix is offered.
    assert found["io.vhost_net"].status is Status.INFO
    assert found["io.vhost_net"].fix == ()
    assert found["tools.libvirt"].status is Status.INFO
    assert found["tools.libvirt"].fix == ("apt-get install -y libvirt-daemon-system",)
    assert found["tools.qemu"].status is Status.OK
    assert exit_status(list(found.values())) == 0


def test_no_dev_kvm_fails(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / "dev/kvm").unlink()
    findings = run_checks(root)
    dev = by_id(findings)["kvm.dev"]
    assert dev.status is Status.FAIL
    assert dev.fix == ("modprobe kvm_intel",)
    assert exit_status(findings) == 1


def test_dev_kvm_permission_denied_fails(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / ".ioctl/KVM_GET_API_VERSION.txt").write_text("error: Permission denied\n")
    dev = by_id(run_checks(root))["kvm.dev"]
    assert dev.status is Status.FAIL
    assert dev.fix == (
        "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm   # what udev normally sets",
        "usermod -aG kvm $USER   # then log in again",
    )


def test_no_virtualization_flags_fail(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    cpuinfo = root / "proc/cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace(" vmx ", " "))
    virt = by_id(run_checks(root))["cpu.virt"]
    assert virt.status is Status.FAIL
    assert "firmware" in virt.summary


def test_nested_configured_but_not_reloaded(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / "etc/modprobe.d/kvm.conf").write_text("options kvm_intel nested=Y\n")
    nested = by_id(run_checks(root))["kvm.nested"]
    assert nested.status is Status.WARN
    assert "not reloaded" in nested.summary
    assert nested.fix == (
        "modprobe -r kvm_intel   # stop running VMs first",
        "modprobe kvm_intel",
        "cat /sys/module/kvm_intel/parameters/nested",
    )


def test_nested_disabled_in_modprobe_d_is_edited(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / "etc/modprobe.d/kvm.conf").write_text("options kvm-intel nested=0 ept=1\n")
    nested = by_id(run_checks(root))["kvm.nested"]
    assert nested.fix[1] == r"sed -i -E 's/\bnested=[^ ]*/nested=1/' /etc/modprobe.d/kvm.conf"


def test_hugepages_reserved_but_unmounted_warns(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    base = root / "sys/kernel/mm/hugepages/hugepages-1048576kB"
    (base / "nr_hugepages").write_text("4\n")
    (base / "free_hugepages").write_text("4\n")
    huge = by_id(run_checks(root))["mem.hugepages_1g"]
    assert huge.status is Status.WARN
    assert huge.fix == (
        "mkdir -p /dev/hugepages1G && mount -t hugetlbfs -o pagesize=1G none /dev/hugepages1G",
    )


def test_missing_qemu_fails(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(AMD)
    (root / ".commands/qemu-system-x86_64_--version.txt").unlink()
    findings = run_checks(root)
    qemu = by_id(findings)["tools.qemu"]
    assert qemu.status is Status.FAIL
    assert qemu.fix == ("apt-get install -y qemu-system-x86",)
    assert exit_status(findings) == 1


def test_failing_tool_command_warns(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(AMD)
    (root / ".commands/perf_--version.txt").write_text("perf not found for kernel 6.1.0\n")
    (root / ".commands/perf_--version.rc").write_text("1\n")
    perf = by_id(run_checks(root))["tools.perf"]
    assert perf.status is Status.WARN
    assert perf.fix == ("apt-get install -y --reinstall linux-perf",)


def test_check_that_hits_an_oserror_reports_instead_of_crashing() -> None:
    def check_broken(probe: HostProbe) -> Finding:
        raise PermissionError(13, "Permission denied", "/sys/kernel/tracing")

    finding = run_check(check_broken, HostProbe(INTEL))
    assert finding.status is Status.WARN
    assert finding.id == "error.broken"
    assert len(CHECKS) == len(ALL_IDS)


def test_ept_off_warns_with_reload_fix(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / "sys/module/kvm_intel/parameters/ept").write_text("N\n")
    ept = by_id(run_checks(root))["kvm.ept_npt"]
    assert ept.status is Status.WARN
    assert "echo 'options kvm-intel ept=1' >> /etc/modprobe.d/kvm.conf" in ept.fix


def test_shadow_vmcs_off_on_a_cpu_without_it_is_info(tree_copy: Callable[[Path], Path]) -> None:
    root = tree_copy(INTEL)
    (root / "sys/module/kvm_intel/parameters/enable_shadow_vmcs").write_text("N\n")
    cpuinfo = root / "proc/cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace(" shadow_vmcs", ""))
    shadow = by_id(run_checks(root))["kvm.shadow_vmcs"]
    assert shadow.status is Status.INFO
    assert shadow.fix == ()
    assert "lacks shadow_vmcs" in shadow.summary
