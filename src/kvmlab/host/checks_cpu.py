"""CPU checks: vendor, virtualization extensions, CPU isolation, NMI watchdog."""

from __future__ import annotations

from kvmlab.host import facts
from kvmlab.host.findings import Finding, Status, finding
from kvmlab.host.probe import HostProbe

NMI_WATCHDOG = "/proc/sys/kernel/nmi_watchdog"
CPU_ISOLATED = "/sys/devices/system/cpu/isolated"
ISOLATION_PARAMS = ("isolcpus", "nohz_full", "rcu_nocbs")
GRUB_HINT = "# kernel cmdline: add to GRUB_CMDLINE_LINUX in /etc/default/grub, update-grub, reboot"


def check_cpu_vendor(probe: HostProbe) -> Finding:
    """CPU vendor and model, CPU count, and whether this host is itself a VM."""
    cpu = facts.cpu_info(probe)
    if cpu is None:
        return finding("cpu.vendor", Status.WARN, probe.cannot_read(facts.CPUINFO))
    cpus = facts.online_cpus(probe)
    where = "this host is a VM (labs here are nested)" if cpu.under_hypervisor else "bare metal"
    hv_flag = "flags: hypervisor" if cpu.under_hypervisor else "flags: no hypervisor"
    return finding(
        "cpu.vendor",
        Status.INFO,
        f"{cpu.vendor}, {cpu.model}, {len(cpus)} CPUs online; {where}",
        [
            (facts.CPUINFO, f"vendor_id: {cpu.vendor}; model name: {cpu.model}"),
            (facts.CPUINFO, hv_flag),
            (facts.CPU_ONLINE, facts.format_cpulist(cpus)),
        ],
    )


def check_cpu_virt(probe: HostProbe) -> Finding:
    """Hardware virtualization extensions: vmx (Intel VT-x) or svm (AMD-V)."""
    cpu = facts.cpu_info(probe)
    if cpu is None:
        return finding("cpu.virt", Status.WARN, probe.cannot_read(facts.CPUINFO))
    flag = cpu.virt_flag
    if flag is not None:
        name = "Intel VT-x" if flag == "vmx" else "AMD-V"
        return finding(
            "cpu.virt", Status.OK, f"{name} ({flag}) available", [(facts.CPUINFO, f"flags: {flag}")]
        )
    evidence = [(facts.CPUINFO, "flags: neither vmx nor svm")]
    if cpu.under_hypervisor:
        summary = "no vmx/svm: the hypervisor below does not pass virtualization to this VM"
        fix = [
            "-cpu host   # QEMU on the L0 host, with nested enabled there",
            "<cpu mode='host-passthrough'/>   # libvirt domain XML on the L0 host",
        ]
    else:
        summary = "no vmx/svm: enable Intel VT-x / AMD SVM in the firmware setup"
        fix = []
    if facts.module_loaded(probe, "kvm_pvm"):
        evidence.append(("/sys/module/kvm_pvm", "present"))
        return finding(
            "cpu.virt",
            Status.WARN,
            f"{summary}; /dev/kvm comes from kvm_pvm (software), not from the CPU",
            evidence,
            fix,
        )
    return finding("cpu.virt", Status.FAIL, f"{summary}; hardware KVM is impossible", evidence, fix)


def suggest_isolated(cpus: list[int]) -> list[int]:
    """CPUs to isolate: all but 0-1 on 4+ CPUs, all but 0 on 2-3, none on 1."""
    keep = 2 if len(cpus) >= 4 else 1
    return sorted(cpus)[keep:]


def check_cpu_isolation(probe: HostProbe) -> Finding:
    """isolcpus, nohz_full and rcu_nocbs on the kernel command line (latency and DPDK labs)."""
    params = facts.cmdline_params(probe)
    present = {p: params[p] for p in ISOLATION_PARAMS if p in params}
    shown = " ".join(f"{k}={v}" for k, v in present.items())
    evidence = [(facts.CMDLINE, shown or f"no {', '.join(ISOLATION_PARAMS)}")]
    isolated = probe.read_value(CPU_ISOLATED)
    if isolated is not None:
        evidence.append((CPU_ISOLATED, isolated or "(empty)"))
    cpus = facts.online_cpus(probe)
    if len(present) == len(ISOLATION_PARAMS):
        return finding(
            "cpu.isolation",
            Status.OK,
            f"CPUs isolated for guests: isolcpus={present['isolcpus']}",
            evidence,
        )
    if present:
        cpulist = facts.format_cpulist(facts.parse_cpulist(next(iter(present.values()))))
        missing = [p for p in ISOLATION_PARAMS if p not in present]
        return finding(
            "cpu.isolation",
            Status.INFO,
            f"partial CPU isolation: {', '.join(missing)} missing",
            evidence,
            [" ".join(f"{p}={cpulist}" for p in missing) + f"   {GRUB_HINT}"],
        )
    chosen = suggest_isolated(cpus)
    if not chosen:
        return finding(
            "cpu.isolation", Status.INFO, "no CPU isolation (one CPU: nothing to isolate)", evidence
        )
    cpulist = facts.format_cpulist(chosen)
    return finding(
        "cpu.isolation",
        Status.INFO,
        "no CPU isolation; pinned vCPUs and DPDK poll loops share CPUs with the host",
        evidence,
        [" ".join(f"{p}={cpulist}" for p in ISOLATION_PARAMS) + f"   {GRUB_HINT}"],
    )


def check_nmi_watchdog(probe: HostProbe) -> Finding:
    """The NMI watchdog interrupts every CPU periodically; latency-sensitive labs turn it off."""
    value = probe.read_value(NMI_WATCHDOG)
    if value is None:
        return finding("cpu.nmi_watchdog", Status.SKIP, probe.cannot_read(NMI_WATCHDOG))
    evidence = [(NMI_WATCHDOG, value)]
    if value == "0":
        return finding("cpu.nmi_watchdog", Status.OK, "NMI watchdog off", evidence)
    return finding(
        "cpu.nmi_watchdog",
        Status.INFO,
        "NMI watchdog on: periodic NMIs on every CPU (turn off for latency or DPDK labs)",
        evidence,
        [
            "sysctl -w kernel.nmi_watchdog=0",
            "echo 'kernel.nmi_watchdog = 0' > /etc/sysctl.d/90-nmi-watchdog.conf",
        ],
    )
