"""Names for what a VM-exit profile shows: exit reasons, I/O ports, MSRs, MMIO addresses.

Exit reason names are exactly what the kernel's ``kvm:kvm_exit`` tracepoint prints
(``__print_symbolic`` over ``SVM_EXIT_REASONS`` / ``VMX_EXIT_REASONS``) and what
``perf kvm stat report`` prints (tools/perf/arch/x86/util/kvm-stat.c builds its tables from
the same two macros). Each name also gets a vendor-neutral *kind* from :data:`KINDS`.

Pure data and small functions; nothing is read from the host.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kvmlab.exits.names_msr import APIC_REGS, APIC_TIMER_REGS, TIMER_MSRS, msr_name

__all__ = [
    "KINDS",
    "TIMER_MMIO",
    "TIMER_MSRS",
    "TIMER_PORTS",
    "exit_reason",
    "mmio_name",
    "msr_name",
    "port_name",
    "reason_kind",
    "vendor_of",
]

KINDS: tuple[str, ...] = (
    "io",
    "msr_read",
    "msr_write",
    "msr",  # SVM: the exit reason does not say read or write
    "npf",  # SVM npf, VMX EPT_VIOLATION
    "mmio",  # VMX EPT_MISCONFIG (KVM's MMIO fast path)
    "hlt",
    "pause",
    "external_interrupt",
    "interrupt_window",
    "nmi",
    "nmi_window",
    "cpuid",
    "hypercall",
    "preemption_timer",
    "exception",
    "cr_access",
    "dr_access",
    "apic",
    "invlpg",
    "xsetbv",
    "rdtsc",
    "rdpmc",
    "task_switch",
    "shutdown",
    "nested_virt",  # VMRUN/VMLOAD/..., VMLAUNCH/VMREAD/..., INVEPT/INVVPID
    "other",
)
"""Vendor-neutral exit kinds, in a stable order."""

# --- SVM -----------------------------------------------------------------------------
# arch/x86/include/uapi/asm/svm.h, SVM_EXIT_REASONS, Linux 6.1.187 (linux-libc-dev).
# Exception vectors from arch/x86/include/uapi/asm/kvm.h (*_VECTOR), same version.
# Later additions, from the kvm patches that add them to the same macro: 0x0a5 "buslock",
# 0x0a6 "idle-halt".
_SVM_EXCP = {
    0: "DE",
    1: "DB",
    3: "BP",
    4: "OF",
    5: "BR",
    6: "UD",
    7: "NM",
    8: "DF",
    10: "TS",
    11: "NP",
    12: "SS",
    13: "GP",
    14: "PF",
    16: "MF",
    17: "AC",
    18: "MC",
    19: "XF",
}

_SVM: tuple[tuple[int, str, str], ...] = (
    *((n, f"read_cr{n}", "cr_access") for n in (0, 2, 3, 4, 8)),
    *((0x10 + n, f"write_cr{n}", "cr_access") for n in (0, 2, 3, 4, 8)),
    *((0x20 + n, f"read_dr{n}", "dr_access") for n in range(8)),
    *((0x30 + n, f"write_dr{n}", "dr_access") for n in range(8)),
    *((0x40 + vec, f"{mnem} excp", "exception") for vec, mnem in _SVM_EXCP.items()),
    (0x060, "interrupt", "external_interrupt"),
    (0x061, "nmi", "nmi"),
    (0x062, "smi", "other"),
    (0x063, "init", "other"),
    (0x064, "vintr", "interrupt_window"),
    (0x065, "cr0_sel_write", "cr_access"),
    (0x066, "read_idtr", "other"),
    (0x067, "read_gdtr", "other"),
    (0x068, "read_ldtr", "other"),
    (0x069, "read_rt", "other"),  # sic: the kernel spells TR as "rt"
    (0x06A, "write_idtr", "other"),
    (0x06B, "write_gdtr", "other"),
    (0x06C, "write_ldtr", "other"),
    (0x06D, "write_rt", "other"),
    (0x06E, "rdtsc", "rdtsc"),
    (0x06F, "rdpmc", "rdpmc"),
    (0x070, "pushf", "other"),
    (0x071, "popf", "other"),
    (0x072, "cpuid", "cpuid"),
    (0x073, "rsm", "other"),
    (0x074, "iret", "other"),
    (0x075, "swint", "other"),
    (0x076, "invd", "other"),
    (0x077, "pause", "pause"),
    (0x078, "hlt", "hlt"),
    (0x079, "invlpg", "invlpg"),
    (0x07A, "invlpga", "nested_virt"),
    (0x07B, "io", "io"),
    (0x07C, "msr", "msr"),
    (0x07D, "task_switch", "task_switch"),
    (0x07E, "ferr_freeze", "other"),
    (0x07F, "shutdown", "shutdown"),
    (0x080, "vmrun", "nested_virt"),
    (0x081, "hypercall", "hypercall"),  # SVM_EXIT_VMMCALL
    (0x082, "vmload", "nested_virt"),
    (0x083, "vmsave", "nested_virt"),
    (0x084, "stgi", "nested_virt"),
    (0x085, "clgi", "nested_virt"),
    (0x086, "skinit", "nested_virt"),
    (0x087, "rdtscp", "rdtsc"),
    (0x088, "icebp", "exception"),
    (0x089, "wbinvd", "other"),
    (0x08A, "monitor", "other"),
    (0x08B, "mwait", "other"),
    (0x08D, "xsetbv", "xsetbv"),
    (0x08F, "write_efer_trap", "msr_write"),
    (0x090, "write_cr0_trap", "cr_access"),
    (0x094, "write_cr4_trap", "cr_access"),
    (0x098, "write_cr8_trap", "cr_access"),
    (0x0A2, "invpcid", "other"),
    (0x0A5, "buslock", "other"),
    (0x0A6, "idle-halt", "hlt"),
    (0x400, "npf", "npf"),
    (0x401, "avic_incomplete_ipi", "apic"),
    (0x402, "avic_unaccelerated_access", "apic"),
    (0x403, "vmgexit", "hypercall"),
    (0x80000001, "vmgexit_mmio_read", "mmio"),
    (0x80000002, "vmgexit_mmio_write", "mmio"),
    (0x80000003, "vmgexit_nmi_complete", "nmi"),
    (0x80000004, "vmgexit_ap_hlt_loop", "hlt"),
    (0x80000005, "vmgexit_ap_jump_table", "other"),
    (0x80000010, "vmgexit_page_state_change", "other"),
    (0x80000011, "vmgexit_guest_request", "other"),
    (0x80000012, "vmgexit_ext_guest_request", "other"),
    (0x80000013, "vmgexit_ap_creation", "other"),
    (0x8000FFFD, "vmgexit_hypervisor_feature", "other"),
    (-1, "invalid_guest_state", "other"),  # SVM_EXIT_ERR
)

# --- VMX -----------------------------------------------------------------------------
# arch/x86/include/uapi/asm/vmx.h, VMX_EXIT_REASONS, Linux 6.1.187 (linux-libc-dev).
# Later additions, from the kvm patches that add them to the same macro: 77 TDCALL,
# 84 MSR_READ_IMM, 85 MSR_WRITE_IMM.
_VMX: tuple[tuple[int, str, str], ...] = (
    (0, "EXCEPTION_NMI", "exception"),
    (1, "EXTERNAL_INTERRUPT", "external_interrupt"),
    (2, "TRIPLE_FAULT", "shutdown"),
    (3, "INIT_SIGNAL", "other"),
    (4, "SIPI_SIGNAL", "other"),
    (7, "INTERRUPT_WINDOW", "interrupt_window"),
    (8, "NMI_WINDOW", "nmi_window"),
    (9, "TASK_SWITCH", "task_switch"),
    (10, "CPUID", "cpuid"),
    (12, "HLT", "hlt"),
    (13, "INVD", "other"),
    (14, "INVLPG", "invlpg"),
    (15, "RDPMC", "rdpmc"),
    (16, "RDTSC", "rdtsc"),
    (18, "VMCALL", "hypercall"),
    (19, "VMCLEAR", "nested_virt"),
    (20, "VMLAUNCH", "nested_virt"),
    (21, "VMPTRLD", "nested_virt"),
    (22, "VMPTRST", "nested_virt"),
    (23, "VMREAD", "nested_virt"),
    (24, "VMRESUME", "nested_virt"),
    (25, "VMWRITE", "nested_virt"),
    (26, "VMOFF", "nested_virt"),
    (27, "VMON", "nested_virt"),
    (28, "CR_ACCESS", "cr_access"),
    (29, "DR_ACCESS", "dr_access"),
    (30, "IO_INSTRUCTION", "io"),
    (31, "MSR_READ", "msr_read"),
    (32, "MSR_WRITE", "msr_write"),
    (33, "INVALID_STATE", "other"),
    (34, "MSR_LOAD_FAIL", "other"),
    (36, "MWAIT_INSTRUCTION", "other"),
    (37, "MONITOR_TRAP_FLAG", "other"),
    (39, "MONITOR_INSTRUCTION", "other"),
    (40, "PAUSE_INSTRUCTION", "pause"),
    (41, "MCE_DURING_VMENTRY", "other"),
    (43, "TPR_BELOW_THRESHOLD", "apic"),
    (44, "APIC_ACCESS", "apic"),
    (45, "EOI_INDUCED", "apic"),
    (46, "GDTR_IDTR", "other"),
    (47, "LDTR_TR", "other"),
    (48, "EPT_VIOLATION", "npf"),
    (49, "EPT_MISCONFIG", "mmio"),
    (50, "INVEPT", "nested_virt"),
    (51, "RDTSCP", "rdtsc"),
    (52, "PREEMPTION_TIMER", "preemption_timer"),
    (53, "INVVPID", "nested_virt"),
    (54, "WBINVD", "other"),
    (55, "XSETBV", "xsetbv"),
    (56, "APIC_WRITE", "apic"),
    (57, "RDRAND", "other"),
    (58, "INVPCID", "other"),
    (59, "VMFUNC", "nested_virt"),
    (60, "ENCLS", "other"),
    (61, "RDSEED", "other"),
    (62, "PML_FULL", "other"),
    (63, "XSAVES", "other"),
    (64, "XRSTORS", "other"),
    (67, "UMWAIT", "other"),
    (68, "TPAUSE", "other"),
    (74, "BUS_LOCK", "other"),
    (75, "NOTIFY", "other"),
    (77, "TDCALL", "hypercall"),
    (84, "MSR_READ_IMM", "msr_read"),
    (85, "MSR_WRITE_IMM", "msr_write"),
)

# Spellings of older kernels for the same code (VMX 7 was PENDING_INTERRUPT before 5.7).
_OLD_VMX_NAMES = {"PENDING_INTERRUPT": "interrupt_window"}

_VMX_FAILED_VMENTRY = 0x80000000  # VMX_EXIT_REASON_FLAGS
_PERF_TRUNCATED = 19  # older perf decodes into char[20]: longer names lose their tail

_SVM_BY_CODE = {code: (name, kind) for code, name, kind in _SVM}
_VMX_BY_CODE = {code: (name, kind) for code, name, kind in _VMX}
_BY_NAME: dict[str, tuple[str, str]] = {
    **{name: ("svm", kind) for _, name, kind in _SVM},
    **{name: ("vmx", kind) for _, name, kind in _VMX},
    **{name: ("vmx", kind) for name, kind in _OLD_VMX_NAMES.items()},
}
_BY_CUT_NAME: dict[str, set[tuple[str, str]]] = {}
"""Names longer than older perf shows them, by the head it shows: one dict lookup a row."""
for _name, _hit in _BY_NAME.items():
    if len(_name) > _PERF_TRUNCATED:
        _BY_CUT_NAME.setdefault(_name[:_PERF_TRUNCATED], set()).add(_hit)


def exit_reason(vendor: str, code: int) -> tuple[str, str]:
    """``(name as kvm_exit prints it, kind)`` for an exit code; ``vendor`` is svm or vmx.

    Unknown codes give ``("0x<hex>", "other")``. Like the tracepoint, VMX uses the basic
    reason (low 16 bits) and appends flags: ``"INVALID_STATE FAILED_VMENTRY"``.
    """
    isa = vendor.lower()
    if isa == "svm":
        code &= 0xFFFFFFFFFFFFFFFF
        if code in (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF):
            code = -1  # SVM_EXIT_ERR seen through a u32 or u64 field
        return _SVM_BY_CODE.get(code, (f"0x{code:x}", "other"))
    if isa == "vmx":
        code &= 0xFFFFFFFF
        basic, flags = code & 0xFFFF, code & ~0xFFFF
        name, kind = _VMX_BY_CODE.get(basic, (f"0x{basic:x}", "other"))
        if flags:
            parts = ["FAILED_VMENTRY"] if flags & _VMX_FAILED_VMENTRY else []
            if rest := flags & ~_VMX_FAILED_VMENTRY:
                parts.append(f"0x{rest:x}")
            name = f"{name} {' '.join(parts)}"
        return name, kind
    raise ValueError(f"unknown vendor {vendor!r}: expected 'svm' or 'vmx'")


def _lookup(name: str) -> tuple[str, str] | None:
    """``(vendor, kind)`` for a reason name as a trace or a perf report shows it."""
    name = name.strip()
    if hit := _BY_NAME.get(name):
        return hit
    head = name.split(" ", 1)[0]  # "HLT FAILED_VMENTRY"
    if (hit := _BY_NAME.get(head)) and hit[0] == "vmx":
        return hit
    matches = _BY_CUT_NAME.get(name, set())
    return next(iter(matches)) if len(matches) == 1 else None


def reason_info(name: str) -> tuple[str, str]:
    """``(vendor, kind)`` of an exit reason name: :func:`vendor_of` and :func:`reason_kind`
    in one look-up."""
    return _lookup(name) or ("", "other")


def reason_kind(name: str) -> str:
    """Kind for an exit reason name in either vendor's spelling; ``"other"`` if unknown."""
    hit = _lookup(name)
    return hit[1] if hit else "other"


def vendor_of(name: str) -> str:
    """``"svm"`` or ``"vmx"`` for an exit reason name; ``""`` if it is neither's."""
    hit = _lookup(name)
    return hit[0] if hit else ""


# --- I/O ports -----------------------------------------------------------------------
# PC/AT conventions as QEMU implements them (hw/intc/i8259.c, hw/timer/i8254.c,
# hw/audio/pcspk.c, hw/rtc/mc146818rtc.c, hw/char/serial-isa.c, hw/char/debugcon.c
# (default iobase 0xe9), hw/nvram/fw_cfg.c with hw/i386/fw_cfg.h FW_CFG_IO_BASE 0x510,
# DMA at 0x514; hw/isa/apm.c 0xb2/0xb3; hw/misc/pvpanic-isa.c 0x505).
# ACPI PM block: QEMU only answers where firmware programs PMBASE.
#  * q35 (ICH9 LPC, include/hw/acpi/ich9.h): PM1_STS +0, PM1_EN +2, PM1_CNT +4, PM_TMR +8,
#    GPE0_STS +0x20, GPE0_EN +0x28 (16 bytes), SMI_EN +0x30, SMI_STS +0x34, TCO +0x60.
#    SeaBIOS and OVMF (OvmfPkg/Include/OvmfPlatforms.h ICH9_PMBASE_VALUE) both use 0x600.
#  * pc (PIIX4 PM, hw/acpi/piix4.c): same PM1/TMR offsets. SeaBIOS's acpi_pm_base starts
#    at 0xb000 but qemu_cfg_init() (src/fw/paravirt.c, coreboot/seabios 023b1d0d) moves it
#    to 0x600 when QEMU supplies ACPI tables ("etc/table-loader"), i.e. with any current
#    QEMU; src/fw/pciinit.c then programs it into PIIX4 (and ICH9) PMBASE. OVMF programs
#    0xb000 on pc (PIIX4_PMBA_VALUE). PIIX4 GPE0 is fixed at 0xafe0 (GPE_BASE).
#  * Hotplug (include/hw/acpi/pc-hotplug.h, hw/acpi/pcihp.c, include/hw/acpi/ich9.h):
#    CPU 0xaf00 (pc) / 0xcd8 (q35), memory 0xa00 (24 bytes), PCI 0xae00 (pc) / 0xcc0
#    (q35; 0xcc4 in older QEMU), 0x18 bytes each.
_UART_REGS = ("data (THR/RBR)", "IER", "IIR/FCR", "LCR", "MCR", "LSR", "MSR", "scratch")
_PM1 = (
    (0x0, 0x1, "ACPI PM1a event (PM1_STS)"),
    (0x2, 0x3, "ACPI PM1a event (PM1_EN)"),
    (0x4, 0x5, "ACPI PM1a control"),
    (0x8, 0xB, "ACPI PM timer"),
)

_PORT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x00, 0x0F, "DMA controller 1 (i8237)"),
    (0x20, 0x20, "PIC master command"),
    (0x21, 0x21, "PIC master data (IMR)"),
    (0x40, 0x40, "PIT channel 0 (i8254)"),
    (0x41, 0x41, "PIT channel 1"),
    (0x42, 0x42, "PIT channel 2 (speaker)"),
    (0x43, 0x43, "PIT mode/command"),
    (0x60, 0x60, "i8042 PS/2 data"),
    (0x61, 0x61, "NMI status/control, PC speaker (PIT channel 2 gate)"),
    (0x64, 0x64, "i8042 PS/2 status/command"),
    (0x70, 0x70, "RTC index (CMOS)"),
    (0x71, 0x71, "RTC data (CMOS)"),
    (0x80, 0x80, "POST code / io delay"),
    (0x81, 0x8F, "DMA page registers"),
    (0x92, 0x92, "port 92 (fast A20, reset)"),
    (0xA0, 0xA0, "PIC slave command"),
    (0xA1, 0xA1, "PIC slave data (IMR)"),
    (0xB2, 0xB2, "APM control (SMI command)"),
    (0xB3, 0xB3, "APM status"),
    (0xC0, 0xDF, "DMA controller 2 (i8237)"),
    (0xE9, 0xE9, "debugcon (isa-debugcon default port)"),
    (0x170, 0x177, "IDE secondary"),
    (0x1F0, 0x1F7, "IDE primary"),
    (0x376, 0x376, "IDE secondary control"),
    (0x3F6, 0x3F6, "IDE primary control / alt status"),
    *(
        (base + off, base + off, f"{com} {reg}")
        for com, base in (("COM1", 0x3F8), ("COM2", 0x2F8), ("COM3", 0x3E8), ("COM4", 0x2E8))
        for off, reg in enumerate(_UART_REGS)
    ),
    (0x378, 0x37F, "LPT1"),
    (0x3B0, 0x3BF, "VGA (monochrome)"),
    (0x3C8, 0x3C8, "VGA DAC write index"),
    (0x3C9, 0x3C9, "VGA DAC data"),
    (0x3D4, 0x3D4, "VGA CRTC index"),
    (0x3D5, 0x3D5, "VGA CRTC data"),
    (0x3DA, 0x3DA, "VGA input status 1"),
    (0x3C0, 0x3DF, "VGA"),
    (0x3F0, 0x3F7, "floppy controller"),
    (0x402, 0x402, "debugcon (firmware debug port, iobase=0x402)"),
    (0x4D0, 0x4D0, "ELCR1 (PIC edge/level)"),
    (0x4D1, 0x4D1, "ELCR2 (PIC edge/level)"),
    (0x505, 0x505, "pvpanic"),
    (0x510, 0x510, "fw_cfg selector"),
    (0x511, 0x511, "fw_cfg data"),
    (0x514, 0x51B, "fw_cfg DMA"),
    (0xA00, 0xA17, "ACPI memory hotplug"),
    *((0x600 + lo, 0x600 + hi, name) for lo, hi, name in _PM1),
    (0x620, 0x627, "ACPI GPE0 status (q35)"),
    (0x628, 0x62F, "ACPI GPE0 enable (q35)"),
    (0x630, 0x633, "ICH9 SMI_EN (q35)"),
    (0x634, 0x637, "ICH9 SMI_STS (q35)"),
    (0x660, 0x67F, "ICH9 TCO (q35)"),
    (0x600, 0x67F, "ACPI PM block"),
    (0xCC0, 0xCD7, "ACPI PCI hotplug (q35)"),
    (0xCD8, 0xCE3, "ACPI CPU hotplug (q35)"),
    (0xCF9, 0xCF9, "reset control (RCR)"),
    (0xCF8, 0xCFB, "PCI config address"),
    (0xCFC, 0xCFF, "PCI config data"),
    (0x5658, 0x5658, "VMware backdoor (vmport)"),
    (0xAE00, 0xAE17, "ACPI PCI hotplug (pc)"),
    (0xAF00, 0xAF1F, "ACPI CPU hotplug (pc)"),
    (0xAFE0, 0xAFE3, "ACPI GPE0 (pc)"),
    *((0xB000 + lo, 0xB000 + hi, name) for lo, hi, name in _PM1),
    (0xB000, 0xB03F, "ACPI PM block"),
)


def _port_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for first, last, name in _PORT_RANGES:
        for port in range(first, last + 1):
            table.setdefault(port, name)  # earlier, narrower entries win
    return table


_PORTS = _port_table()


def port_name(port: int) -> str:
    """Name of an x86 I/O port on a QEMU pc/q35 guest; ``""`` if unknown."""
    return _PORTS.get(port, "")


TIMER_PORTS = frozenset(
    {0x40, 0x41, 0x42, 0x43, 0x61, 0x70, 0x71, *range(0x608, 0x60C), *range(0xB008, 0xB00C)}
)
"""Ports of clock sources and timers: PIT, port 0x61 (PIT gate), RTC, ACPI PM timer."""


# --- MMIO ----------------------------------------------------------------------------
# QEMU defaults: include/hw/timer/hpet.h (HPET_BASE 0xfed00000, HPET_LEN 0x400; registers
# as Linux arch/x86/include/asm/hpet.h), include/hw/i386/apic.h (0xfee00000),
# include/hw/i386/ioapic.h (0xfec00000), include/hw/acpi/tpm.h (TPM_TIS_ADDR_BASE
# 0xfed40000, size 0x5000), include/hw/pci-host/q35.h (MCH_HOST_BRIDGE_PCIEXBAR_DEFAULT
# 0xb0000000, 256 MiB; q35 only: on pc with > 2.75 GiB of RAM that address is RAM).
def _hpet(off: int) -> str:
    off &= ~7  # 64-bit registers, often accessed as two 32-bit halves
    fixed = {
        0x000: "capabilities/ID",
        0x010: "config",
        0x020: "interrupt status",
        0x0F0: "main counter",
    }
    if off in fixed:
        return f"HPET {fixed[off]}"
    timer, reg = divmod(off - 0x100, 0x20)
    regs = {0x00: "config", 0x08: "comparator", 0x10: "FSB route"}
    if off >= 0x100 and reg in regs:
        return f"HPET timer{timer} {regs[reg]}"
    return "HPET"


def _lapic(off: int) -> str:
    reg = APIC_REGS.get(off & ~0xF)
    return f"LAPIC {reg}" if reg else "LAPIC"


def _ioapic(off: int) -> str:
    reg = {0x00: "IOREGSEL", 0x10: "IOWIN", 0x40: "EOI"}
    return f"IOAPIC {reg[off & ~0xF]}" if off & ~0xF in reg else "IOAPIC"


def _ecam(off: int) -> str:
    bus, dev, fn = off >> 20, (off >> 15) & 0x1F, (off >> 12) & 0x7
    return f"PCIe ECAM (MMCONFIG) {bus:02x}:{dev:02x}.{fn} reg 0x{off & 0xFFF:x}"


def _named(name: str) -> Callable[[int], str]:
    return lambda _off: name


_MMIO: tuple[tuple[int, int, Callable[[int], str]], ...] = (
    (0xA0000, 0x20000, _named("legacy VGA window")),
    (0xC0000, 0x20000, _named("option ROM area")),
    (0xE0000, 0x20000, _named("BIOS ROM (legacy shadow)")),
    (0xB0000000, 0x10000000, _ecam),
    (0xFEC00000, 0x1000, _ioapic),
    (0xFED00000, 0x400, _hpet),
    (0xFED40000, 0x5000, _named("TPM (TIS/CRB)")),
    (0xFEE00000, 0x1000, _lapic),
    (0xFFC00000, 0x400000, _named("firmware flash/ROM (top of 4 GiB)")),
)


def mmio_name(gpa: int, regions: Sequence[tuple[int, int, str]] = ()) -> str:
    """Name of a guest-physical address; ``""`` if unknown.

    ``regions`` are ``(start, size, name)`` the caller knows (PCI BARs from QMP
    ``query-pci``, for example); they are tried before the fixed PC/QEMU ranges.
    """
    for start, size, name in regions:
        if start <= gpa < start + size:
            return name
    for start, size, namer in _MMIO:
        if start <= gpa < start + size:
            return namer(gpa - start)
    return ""


TIMER_MMIO: tuple[tuple[int, int, str], ...] = (
    (0xFED00000, 0x400, "HPET"),
    *((0xFEE00000 + off, 0x10, f"LAPIC {APIC_REGS[off]}") for off in sorted(APIC_TIMER_REGS)),
)
"""``(start, size, name)`` of MMIO timer registers: the HPET and the xAPIC timer."""
