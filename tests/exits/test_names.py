"""Exit reason, port, MSR and MMIO names against the values in the Linux and QEMU headers."""

from __future__ import annotations

import pytest

from kvmlab.exits import names
from kvmlab.exits.names import (
    KINDS,
    TIMER_MMIO,
    TIMER_MSRS,
    TIMER_PORTS,
    exit_reason,
    mmio_name,
    msr_name,
    port_name,
    reason_kind,
    vendor_of,
)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0x07B, ("io", "io")),
        (0x07C, ("msr", "msr")),
        (0x400, ("npf", "npf")),
        (0x078, ("hlt", "hlt")),
        (0x060, ("interrupt", "external_interrupt")),  # SVM_EXIT_INTR prints "interrupt"
        (0x064, ("vintr", "interrupt_window")),
        (0x077, ("pause", "pause")),
        (0x072, ("cpuid", "cpuid")),
        (0x081, ("hypercall", "hypercall")),  # SVM_EXIT_VMMCALL prints "hypercall"
        (0x080, ("vmrun", "nested_virt")),
        (0x401, ("avic_incomplete_ipi", "apic")),
        (0x04E, ("PF excp", "exception")),  # SVM_EXIT_EXCP_BASE + PF_VECTOR
        (0x053, ("XF excp", "exception")),  # XM_VECTOR prints as XF
        (0x000, ("read_cr0", "cr_access")),
        (0x018, ("write_cr8", "cr_access")),
        (0x037, ("write_dr7", "dr_access")),
        (0x069, ("read_rt", "other")),
        (-1, ("invalid_guest_state", "other")),
        (0xFFFFFFFF, ("invalid_guest_state", "other")),
    ],
)
def test_svm_codes(code: int, expected: tuple[str, str]) -> None:
    assert exit_reason("svm", code) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (30, ("IO_INSTRUCTION", "io")),
        (31, ("MSR_READ", "msr_read")),
        (32, ("MSR_WRITE", "msr_write")),
        (48, ("EPT_VIOLATION", "npf")),
        (49, ("EPT_MISCONFIG", "mmio")),
        (1, ("EXTERNAL_INTERRUPT", "external_interrupt")),
        (12, ("HLT", "hlt")),
        (40, ("PAUSE_INSTRUCTION", "pause")),
        (52, ("PREEMPTION_TIMER", "preemption_timer")),
        (7, ("INTERRUPT_WINDOW", "interrupt_window")),
        (8, ("NMI_WINDOW", "nmi_window")),
        (10, ("CPUID", "cpuid")),
        (18, ("VMCALL", "hypercall")),
        (20, ("VMLAUNCH", "nested_virt")),
        (44, ("APIC_ACCESS", "apic")),
        (55, ("XSETBV", "xsetbv")),
    ],
)
def test_vmx_codes(code: int, expected: tuple[str, str]) -> None:
    assert exit_reason("vmx", code) == expected


def test_vmx_flags_follow_the_basic_reason_like_the_tracepoint() -> None:
    assert exit_reason("vmx", 0x80000021) == ("INVALID_STATE FAILED_VMENTRY", "other")
    assert exit_reason("VMX", 0x80000000 | 12) == ("HLT FAILED_VMENTRY", "hlt")
    assert reason_kind("HLT FAILED_VMENTRY") == "hlt"
    assert vendor_of("INVALID_STATE FAILED_VMENTRY") == "vmx"


def test_unknown_codes_and_vendor() -> None:
    assert exit_reason("svm", 0x999) == ("0x999", "other")
    assert exit_reason("vmx", 99) == ("0x63", "other")
    with pytest.raises(ValueError, match="svm"):
        exit_reason("arm", 1)


def test_every_kind_is_declared_and_every_name_maps_back() -> None:
    assert len(set(KINDS)) == len(KINDS)
    for vendor, table in (("svm", names._SVM), ("vmx", names._VMX)):
        codes = [code for code, _, _ in table]
        assert len(codes) == len(set(codes)), vendor
        for code, name, kind in table:
            assert kind in KINDS, name
            assert exit_reason(vendor, code) == (name, kind)
            assert reason_kind(name) == kind
            assert vendor_of(name) == vendor


def test_names_are_distinct_across_vendors() -> None:
    svm = {name for _, name, _ in names._SVM}
    vmx = {name for _, name, _ in names._VMX}
    assert not svm & vmx
    assert all(name == name.upper() for name in vmx)


def test_reason_kind_accepts_old_and_truncated_spellings() -> None:
    assert reason_kind("PENDING_INTERRUPT") == "interrupt_window"  # before Linux 5.7
    # older perf kvm stat decodes into char[20], cutting long names to 19 characters
    assert reason_kind("avic_unaccelerated_access"[:19]) == "apic"
    assert vendor_of("avic_unaccelerated_access"[:19]) == "svm"
    long_names = [n for _, n, _ in (*names._SVM, *names._VMX) if len(n) > 19]
    assert long_names
    for name in long_names:
        assert reason_kind(name[:19]) == reason_kind(name)


@pytest.mark.parametrize("name", ["UNKNOWN", "", "intr", "vmmcall", "0x999", "bogus"])
def test_unknown_names(name: str) -> None:
    assert reason_kind(name) == "other"
    assert vendor_of(name) == ""


@pytest.mark.parametrize(
    ("port", "needle"),
    [
        (0x70, "RTC index (CMOS)"),
        (0x71, "RTC data (CMOS)"),
        (0x40, "PIT channel 0"),
        (0x43, "PIT mode/command"),
        (0x20, "PIC master"),
        (0xA1, "PIC slave"),
        (0x61, "PC speaker"),
        (0x64, "i8042"),
        (0x80, "POST"),
        (0x3F8, "COM1"),
        (0x3FD, "COM1 LSR"),
        (0x2F8, "COM2"),
        (0x402, "debugcon"),
        (0x510, "fw_cfg"),
        (0x511, "fw_cfg"),
        (0x514, "fw_cfg DMA"),
        (0x600, "PM1a event"),
        (0x604, "PM1a control"),
        (0x608, "PM timer"),
        (0x620, "GPE0"),
        (0xB008, "PM timer"),
        (0xB004, "PM1a control"),
        (0xAFE0, "GPE0"),
        (0xCF8, "PCI config address"),
        (0xCFC, "PCI config data"),
        (0xCFF, "PCI config data"),
        (0xCF9, "reset"),
        (0x1F0, "IDE primary"),
        (0x3F6, "IDE primary control"),
        (0x3D4, "VGA"),
        (0x92, "A20"),
        (0xB2, "APM"),
    ],
)
def test_port_names(port: int, needle: str) -> None:
    assert needle in port_name(port)


@pytest.mark.parametrize("port", [0x1234, 0xFFFF, 0x10000, -1])
def test_unknown_ports(port: int) -> None:
    assert port_name(port) == ""


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (0x10, "IA32_TSC"),
        (0x1B, "IA32_APIC_BASE"),
        (0x3B, "IA32_TSC_ADJUST"),
        (0x48, "IA32_SPEC_CTRL"),
        (0x49, "IA32_PRED_CMD"),
        (0x10A, "IA32_ARCH_CAPABILITIES"),
        (0x1A0, "IA32_MISC_ENABLE"),
        (0x277, "IA32_PAT"),
        (0x2FF, "IA32_MTRR_DEF_TYPE"),
        (0x6E0, "IA32_TSC_DEADLINE"),
        (0xDA0, "IA32_XSS"),
        (0xC0000080, "EFER"),
        (0xC0000082, "LSTAR"),
        (0xC0000102, "KERNEL_GS_BASE"),
        (0xC0000103, "TSC_AUX"),
        (0xC0010015, "AMD_HWCR"),
        (0xC0010114, "AMD_VM_CR"),
        (0xC0010117, "AMD_VM_HSAVE_PA"),
        (0x11, "KVM_WALL_CLOCK"),
        (0x12, "KVM_SYSTEM_TIME"),
        (0x4B564D00, "KVM_WALL_CLOCK_NEW"),
        (0x4B564D01, "KVM_SYSTEM_TIME_NEW"),
        (0x4B564D08, "KVM_MIGRATION_CONTROL"),
        (0x40000000, "HV_GUEST_OS_ID"),
        (0x40000020, "HV_TIME_REF_COUNT"),
        (0x40000021, "HV_REFERENCE_TSC"),
        (0x40000072, "HV_TPR"),
        (0x40000084, "HV_EOM"),
        (0x4000009F, "HV_SINT15"),
        (0x400000B0, "HV_STIMER0_CONFIG"),
        (0x400000B7, "HV_STIMER3_COUNT"),
        (0x40000105, "HV_CRASH_CTL"),
        (0x802, "x2APIC ID"),
        (0x808, "x2APIC TPR"),
        (0x80B, "x2APIC EOI"),
        (0x80F, "x2APIC SVR"),
        (0x817, "x2APIC ISR7"),
        (0x820, "x2APIC IRR0"),
        (0x828, "x2APIC ESR"),
        (0x830, "x2APIC ICR"),
        (0x832, "x2APIC LVT timer"),
        (0x837, "x2APIC LVT error"),
        (0x838, "x2APIC timer initial count"),
        (0x839, "x2APIC timer current count"),
        (0x83E, "x2APIC timer divide config"),
        (0x83F, "x2APIC SELF_IPI"),
        (0xC3, "IA32_PMC2"),
        (0x187, "IA32_PERFEVTSEL1"),
        (0x30A, "IA32_FIXED_CTR1"),
        (0x38F, "IA32_PERF_GLOBAL_CTRL"),
        (0x202, "IA32_MTRR_PHYSBASE1"),
        (0x203, "IA32_MTRR_PHYSMASK1"),
        (0x268, "MTRRfix4K_C0000"),
        (0x26F, "MTRRfix4K_F8000"),
        (0x405, "IA32_MC1_STATUS"),
        (0xC0010004, "AMD_PERF_CTR0 (legacy)"),
        (0xC0010202, "AMD_PERF_CTL1"),
        (0xC001020B, "AMD_PERF_CTR5"),
    ],
)
def test_msr_names(index: int, expected: str) -> None:
    assert msr_name(index) == expected


def test_unknown_msrs() -> None:
    assert msr_name(0x12345) == ""
    assert msr_name(0x831) == "x2APIC (reserved)"  # ICR is one 64-bit MSR in x2APIC mode


@pytest.mark.parametrize(
    ("gpa", "needle"),
    [
        (0xFED00000 + 0xF0, "HPET main counter"),
        (0xFED00000 + 0xF4, "HPET main counter"),
        (0xFED00000 + 0x108, "HPET timer0 comparator"),
        (0xFED00000 + 0x120, "HPET timer1 config"),
        (0xFEE00000 + 0xB0, "LAPIC EOI"),
        (0xFEE00000 + 0x300, "LAPIC ICR"),
        (0xFEE00000 + 0x380, "LAPIC timer initial count"),
        (0xFEC00000, "IOAPIC IOREGSEL"),
        (0xFEC00010, "IOAPIC IOWIN"),
        (0xFED40000, "TPM"),
        (0xB0000000 + (0x1F << 15) + 0x40, "ECAM"),
        (0xA0000, "VGA"),
        (0xFFFFFFF0, "firmware"),
    ],
)
def test_mmio_names(gpa: int, needle: str) -> None:
    assert needle in mmio_name(gpa)


def test_mmio_caller_regions_come_first() -> None:
    regions = [(0xFE000000, 0x4000, "virtio-net BAR4"), (0xFED00000, 0x400, "my HPET")]
    assert mmio_name(0xFE000010, regions) == "virtio-net BAR4"
    assert mmio_name(0xFED000F0, regions) == "my HPET"
    assert mmio_name(0xFE004000, regions) == ""
    assert mmio_name(0x1000) == ""


def test_ecam_address_decodes_bdf() -> None:
    assert mmio_name(0xB0000000 + (1 << 20) + (2 << 15) + (3 << 12) + 0x10).endswith(
        "01:02.3 reg 0x10"
    )


def test_timer_sets_name_clock_sources() -> None:
    assert {0x40, 0x43, 0x70, 0x71, 0x608, 0xB008} <= TIMER_PORTS
    assert all(port_name(port) for port in TIMER_PORTS)
    assert {0x10, 0x6E0, 0x832, 0x838, 0x839, 0x83E, 0x40000020, 0x400000B3} <= TIMER_MSRS
    assert all(msr_name(index) for index in TIMER_MSRS)
    assert 0x830 not in TIMER_MSRS
    for start, size, name in TIMER_MMIO:
        assert size > 0
        assert mmio_name(start) == name or mmio_name(start).startswith(name)
