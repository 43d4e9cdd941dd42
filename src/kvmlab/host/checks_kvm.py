"""KVM checks: /dev/kvm, which KVM is loaded, and the kvm_intel / kvm_amd parameters."""

from __future__ import annotations

from kvmlab.host import facts
from kvmlab.host.facts import Flavour
from kvmlab.host.findings import Finding, Status, finding
from kvmlab.host.probe import KVM_API_VERSION, HostProbe

DEV_KVM = "/dev/kvm"
MODPROBE_CONF = "/etc/modprobe.d/kvm.conf"
PERMISSION_FIX = [
    "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm   # what udev normally sets",
    "usermod -aG kvm $USER   # then log in again",
]
# Listed only on the "vmx flags" line of /proc/cpuinfo (Linux 5.8+).
VMX_ONLY_FLAGS = frozenset({"shadow_vmcs", "apicv", "unrestricted_guest"})
PVM_EXPLAINED = (
    "kvm_pvm is loaded: /dev/kvm is PVM, software nested KVM for VMs without hardware "
    "virtualization; stock guest kernels crawl under it, so kvmlab runs guests under TCG"
)


def reload_fix(probe: HostProbe, module: Flavour, name: str, value: str) -> tuple[str, list[str]]:
    """A note and the commands that set ``name=value`` for ``module`` for good and reload it."""
    opts = [o for o in facts.modprobe_options(probe, module) if o.name == name]
    lines = [f"modprobe -r {module}   # stop running VMs first"]
    note = ""
    if opts and facts.is_on(opts[-1].value) == facts.is_on(value):
        note = f" ({opts[-1].file} sets {name}={opts[-1].value}; module not reloaded since)"
    elif opts:
        note = f" ({opts[-1].file} sets {name}={opts[-1].value})"
        lines.append(f"sed -i -E 's/\\b{name}=[^ ]*/{name}={value}/' {opts[-1].file}")
    else:
        lines.append(f"echo 'options {module.replace('_', '-')} {name}={value}' >> {MODPROBE_CONF}")
    lines += [f"modprobe {module}", f"cat {facts.param_path(module, name)}"]
    return note, lines


def _modprobe_evidence(probe: HostProbe, module: Flavour, name: str) -> list[tuple[str, str]]:
    return [
        (o.file, f"options {module.replace('_', '-')} {o.name}={o.value}")
        for o in facts.modprobe_options(probe, module)
        if o.name == name
    ]


def _load_fix(probe: HostProbe) -> list[str]:
    """``modprobe kvm_intel`` / ``kvm_amd`` when the CPU has vmx / svm (else see cpu.virt)."""
    cpu = facts.cpu_info(probe)
    module = facts.vendor_module(cpu)
    return [f"modprobe {module}"] if module and cpu and cpu.virt_flag else []


def check_dev_kvm(probe: HostProbe) -> Finding:
    """/dev/kvm exists and can be opened read-write; KVM_GET_API_VERSION answers 12."""
    if not probe.exists(DEV_KVM):
        return finding(
            "kvm.dev",
            Status.FAIL,
            "/dev/kvm is missing: no KVM, guests fall back to TCG (10-50x slower)",
            [(DEV_KVM, "missing")],
            _load_fix(probe),
        )
    access = probe.kvm_access()
    source = f"open({DEV_KVM}, O_RDWR) + ioctl(KVM_GET_API_VERSION)"
    if not access.verified:
        return finding(
            "kvm.dev",
            Status.INFO,
            "/dev/kvm present (not opened: recorded tree)",
            [(DEV_KVM, "present")],
        )
    if access.error is not None:
        fix = PERMISSION_FIX if "denied" in access.error else []
        return finding(
            "kvm.dev",
            Status.FAIL,
            f"/dev/kvm present but unusable: {access.error}",
            [(DEV_KVM, "present"), (source, access.error)],
            fix,
        )
    evidence = [(DEV_KVM, "present"), (source, str(access.api_version))]
    if access.api_version != KVM_API_VERSION:
        return finding(
            "kvm.dev",
            Status.WARN,
            f"/dev/kvm answers API version {access.api_version}, expected {KVM_API_VERSION}",
            evidence,
        )
    return finding(
        "kvm.dev", Status.OK, f"/dev/kvm usable (KVM API version {access.api_version})", evidence
    )


def check_flavour(probe: HostProbe) -> Finding:
    """Which KVM module provides /dev/kvm: kvm_intel, kvm_amd, or kvm_pvm (software)."""
    flavour = facts.kvm_flavour(probe)
    evidence = [
        (f"/sys/module/{m}", "present" if facts.module_loaded(probe, m) else "absent")
        for m in facts.FLAVOUR_ORDER
    ]
    if flavour == "kvm_pvm":
        return finding("kvm.flavour", Status.WARN, PVM_EXPLAINED, evidence)
    if flavour in facts.HARDWARE_FLAVOURS:
        cpu = "Intel VT-x" if flavour == "kvm_intel" else "AMD-V"
        return finding("kvm.flavour", Status.OK, f"hardware KVM: {flavour} ({cpu})", evidence)
    return finding("kvm.flavour", Status.WARN, "no KVM module loaded", evidence, _load_fix(probe))


def _hardware(probe: HostProbe, check_id: str) -> Flavour | Finding:
    """The hardware flavour, or a SKIP finding when kvm_intel/kvm_amd is not what runs VMs."""
    flavour = facts.kvm_flavour(probe)
    if flavour in facts.HARDWARE_FLAVOURS:
        return flavour
    why = "kvm_pvm is loaded" if flavour == "kvm_pvm" else "no kvm_intel or kvm_amd loaded"
    return finding(check_id, Status.SKIP, f"{why}: no hardware KVM parameters to check")


def check_nested(probe: HostProbe) -> Finding:
    """Nested virtualization (kvm_intel/kvm_amd ``nested``): lets L1 guests run KVM."""
    flavour = facts.kvm_flavour(probe)
    if flavour == "kvm_pvm":
        return finding(
            "kvm.nested",
            Status.SKIP,
            "kvm_pvm has no nested parameter; nested labs run L1 under TCG with -cpu max "
            "(which exposes svm) and load kvm-amd nested=1 inside it",
        )
    hw = _hardware(probe, "kvm.nested")
    if isinstance(hw, Finding):
        return hw
    path = facts.param_path(hw, "nested")
    value = facts.module_param(probe, hw, "nested")
    if value is None:
        return finding(
            "kvm.nested", Status.WARN, f"{hw} has no nested parameter", [(path, "missing")]
        )
    evidence = [(path, value), *_modprobe_evidence(probe, hw, "nested")]
    if facts.is_on(value):
        return finding("kvm.nested", Status.OK, "nested virtualization on", evidence)
    note, fix = reload_fix(probe, hw, "nested", "1")
    return finding(
        "kvm.nested",
        Status.WARN,
        f"nested virtualization off: L1 guests get no /dev/kvm{note}",
        evidence,
        fix,
    )


def _cpu_lacks(cpu: facts.CpuInfo | None, flag: str | None) -> bool | None:
    """Whether the CPU lacks ``flag``; None when cpuinfo does not say."""
    if cpu is None or flag is None:
        return None
    if flag in VMX_ONLY_FLAGS:
        return None if not cpu.vmx_flags else flag not in cpu.vmx_flags
    return not cpu.has(flag)


def _param_check(
    probe: HostProbe,
    check_id: str,
    hw: Flavour,
    param: str,
    cpu_flag: str | None,
    on_text: str,
    off_text: str,
    off_status: Status = Status.WARN,
) -> Finding:
    """Shared shape of the boolean parameter checks: on -> OK; off -> reload fix unless no CPU."""
    path = facts.param_path(hw, param)
    value = facts.module_param(probe, hw, param)
    if value is None:
        return finding(check_id, Status.INFO, f"{hw} has no {param} parameter", [(path, "missing")])
    evidence = [(path, value)]
    cpu_lacks = _cpu_lacks(facts.cpu_info(probe), cpu_flag)
    if cpu_lacks is not None:
        where = "vmx flags" if cpu_flag in VMX_ONLY_FLAGS else "flags"
        evidence.append((facts.CPUINFO, f"{where}: {'no ' if cpu_lacks else ''}{cpu_flag}"))
    if facts.is_on(value):
        return finding(check_id, Status.OK, on_text, evidence)
    if cpu_lacks:
        return finding(check_id, Status.INFO, f"{off_text} (the CPU lacks {cpu_flag})", evidence)
    evidence += _modprobe_evidence(probe, hw, param)
    note, fix = reload_fix(probe, hw, param, "1")
    return finding(check_id, off_status, f"{off_text}{note}", evidence, fix)


def check_ept_npt(probe: HostProbe) -> Finding:
    """Two-dimensional paging: kvm_intel ``ept`` / kvm_amd ``npt`` and the CPU flag."""
    hw = _hardware(probe, "kvm.ept_npt")
    if isinstance(hw, Finding):
        return hw
    name = "ept" if hw == "kvm_intel" else "npt"
    return _param_check(
        probe,
        "kvm.ept_npt",
        hw,
        name,
        name,
        f"{name.upper()} on: guests (and nested guests, {name.upper()}-on-{name.upper()}) "
        "use hardware paging",
        f"{name.upper()} off: shadow paging, nested guests several times slower",
    )


def check_shadow_vmcs(probe: HostProbe) -> Finding:
    """VMCS shadowing (kvm_intel ``enable_shadow_vmcs``): fewer exits from L1's VMREAD/VMWRITE."""
    hw = _hardware(probe, "kvm.shadow_vmcs")
    if isinstance(hw, Finding):
        return hw
    if hw != "kvm_intel":
        return finding("kvm.shadow_vmcs", Status.SKIP, "VMCS shadowing is Intel-only")
    return _param_check(
        probe,
        "kvm.shadow_vmcs",
        hw,
        "enable_shadow_vmcs",
        "shadow_vmcs",
        "VMCS shadowing on: L1's VMREAD/VMWRITE run without exits",
        "VMCS shadowing off: every VMREAD/VMWRITE in L1 exits to L0",
    )


def check_apic_virt(probe: HostProbe) -> Finding:
    """APIC virtualization: kvm_intel ``enable_apicv`` or kvm_amd ``avic``."""
    hw = _hardware(probe, "kvm.apic_virt")
    if isinstance(hw, Finding):
        return hw
    if hw == "kvm_intel":
        return _param_check(
            probe,
            "kvm.apic_virt",
            hw,
            "enable_apicv",
            "apicv",
            "APICv on: interrupts reach guests with fewer exits",
            "APICv off: every guest APIC access and interrupt costs exits",
        )
    return _param_check(
        probe,
        "kvm.apic_virt",
        hw,
        "avic",
        "avic",
        "AVIC on: interrupts reach guests with fewer exits",
        "AVIC off (the kvm_amd default): guest interrupts cost exits (matters with many vCPUs)",
        off_status=Status.INFO,
    )


def check_unrestricted_guest(probe: HostProbe) -> Finding:
    """kvm_intel ``unrestricted_guest``: real-mode guest code runs natively instead of emulated."""
    hw = _hardware(probe, "kvm.unrestricted_guest")
    if isinstance(hw, Finding):
        return hw
    if hw != "kvm_intel":
        return finding(
            "kvm.unrestricted_guest",
            Status.SKIP,
            "Intel-only parameter: AMD-V runs real mode natively",
        )
    return _param_check(
        probe,
        "kvm.unrestricted_guest",
        hw,
        "unrestricted_guest",
        "unrestricted_guest",
        "unrestricted guest on: real-mode firmware and boot code run natively",
        "unrestricted guest off: real-mode code is emulated, guests boot slowly",
    )
