"""Names for MSR indices seen in ``kvm_msr`` traces and ``perf kvm stat --event=msr``.

Facts only, copied from these files (no code):

* Linux ``arch/x86/include/asm/msr-index.h`` (torvalds/linux at 002bba56, v6.9 era):
  architectural, Intel and AMD MSRs; ``arch/x86/include/uapi/asm/mtrr.h`` (6.1, from
  linux-libc-dev 6.1.187): variable MTRRs at ``0x200 + 2n`` (base) / ``+1`` (mask).
* Linux ``arch/x86/include/asm/apicdef.h``: local APIC register offsets; the x2APIC MSR
  for offset ``off`` is ``APIC_BASE_MSR (0x800) + off >> 4``.
* Linux ``arch/x86/include/uapi/asm/kvm_para.h`` (6.1.187): KVM paravirtual MSRs.
* Linux ``arch/x86/include/asm/hyperv-tlfs.h`` (torvalds/linux at 010e85f9) for the
  Hyper-V synthetic MSRs; ``HV_X64_MSR_TSC_INVARIANT_CONTROL`` (0x40000118) and the
  ``SYNDBG`` MSRs (0x400000f1-f5, 0x400000ff) from later versions of the same header.
"""

from __future__ import annotations

# Local APIC register offsets (apicdef.h). Used for x2APIC MSRs and xAPIC MMIO names.
APIC_REGS: dict[int, str] = {
    0x020: "ID",
    0x030: "version",
    0x080: "TPR",
    0x090: "APR",
    0x0A0: "PPR",
    0x0B0: "EOI",
    0x0C0: "RRD",
    0x0D0: "LDR",
    0x0E0: "DFR",
    0x0F0: "SVR",
    **{0x100 + 0x10 * n: f"ISR{n}" for n in range(8)},
    **{0x180 + 0x10 * n: f"TMR{n}" for n in range(8)},
    **{0x200 + 0x10 * n: f"IRR{n}" for n in range(8)},
    0x280: "ESR",
    0x2F0: "LVT CMCI",
    0x300: "ICR",
    0x310: "ICR2",
    0x320: "LVT timer",
    0x330: "LVT thermal",
    0x340: "LVT perf",
    0x350: "LVT LINT0",
    0x360: "LVT LINT1",
    0x370: "LVT error",
    0x380: "timer initial count",
    0x390: "timer current count",
    0x3E0: "timer divide config",
    0x3F0: "SELF_IPI",
}
"""Local APIC register name by MMIO offset (xAPIC) from the APIC base."""

APIC_TIMER_REGS = frozenset({0x320, 0x380, 0x390, 0x3E0})
"""APIC register offsets that program or read the APIC timer."""

X2APIC_BASE = 0x800

_MSRS: dict[int, str] = {
    # msr-index.h, Intel-defined and architectural.
    0x00000000: "IA32_P5_MC_ADDR",
    0x00000001: "IA32_P5_MC_TYPE",
    0x00000010: "IA32_TSC",
    0x00000017: "IA32_PLATFORM_ID",
    0x0000001B: "IA32_APIC_BASE",
    0x00000033: "TEST_CTRL",
    0x00000034: "SMI_COUNT",
    0x0000003A: "IA32_FEATURE_CONTROL",
    0x0000003B: "IA32_TSC_ADJUST",
    0x00000048: "IA32_SPEC_CTRL",
    0x00000049: "IA32_PRED_CMD",
    0x0000004E: "PPIN_CTL",
    0x0000004F: "PPIN",
    0x00000079: "IA32_UCODE_WRITE",
    0x0000008B: "IA32_UCODE_REV",
    0x0000009B: "IA32_SMM_MONITOR_CTL",
    0x0000009E: "IA32_SMBASE",
    0x000000BD: "IA32_XAPIC_DISABLE_STATUS",
    0x000000CE: "PLATFORM_INFO",
    0x000000CF: "IA32_CORE_CAPS",
    0x000000E1: "IA32_UMWAIT_CONTROL",
    0x000000E2: "PKG_CST_CONFIG_CONTROL",
    0x000000E7: "IA32_MPERF",
    0x000000E8: "IA32_APERF",
    0x000000FE: "IA32_MTRRCAP",
    0x0000010A: "IA32_ARCH_CAPABILITIES",
    0x0000010B: "IA32_FLUSH_CMD",
    0x0000010F: "TSX_FORCE_ABORT",
    0x00000122: "IA32_TSX_CTRL",
    0x00000123: "IA32_MCU_OPT_CTRL",
    0x00000140: "MISC_FEATURES_ENABLES",
    0x00000174: "IA32_SYSENTER_CS",
    0x00000175: "IA32_SYSENTER_ESP",
    0x00000176: "IA32_SYSENTER_EIP",
    0x00000179: "IA32_MCG_CAP",
    0x0000017A: "IA32_MCG_STATUS",
    0x0000017B: "IA32_MCG_CTL",
    0x00000198: "IA32_PERF_STATUS",
    0x00000199: "IA32_PERF_CTL",
    0x0000019A: "IA32_THERM_CONTROL",
    0x0000019B: "IA32_THERM_INTERRUPT",
    0x0000019C: "IA32_THERM_STATUS",
    0x0000019D: "THERM2_CTL",
    0x000001A0: "IA32_MISC_ENABLE",
    0x000001A2: "TEMPERATURE_TARGET",
    0x000001A4: "MISC_FEATURE_CONTROL",
    0x000001B0: "IA32_ENERGY_PERF_BIAS",
    0x000001B1: "IA32_PACKAGE_THERM_STATUS",
    0x000001B2: "IA32_PACKAGE_THERM_INTERRUPT",
    0x000001C4: "IA32_XFD",
    0x000001C5: "IA32_XFD_ERR",
    0x000001D9: "IA32_DEBUGCTL",
    0x00000250: "MTRRfix64K_00000",
    0x00000258: "MTRRfix16K_80000",
    0x00000259: "MTRRfix16K_A0000",
    **{0x268 + n: f"MTRRfix4K_{0xC0000 + 0x8000 * n:05X}" for n in range(8)},
    0x00000277: "IA32_PAT",
    0x000002FF: "IA32_MTRR_DEF_TYPE",
    0x00000329: "PERF_METRICS",
    0x00000345: "IA32_PERF_CAPABILITIES",
    0x0000038D: "IA32_FIXED_CTR_CTRL",
    0x0000038E: "IA32_PERF_GLOBAL_STATUS",
    0x0000038F: "IA32_PERF_GLOBAL_CTRL",
    0x00000390: "IA32_PERF_GLOBAL_OVF_CTRL",
    0x000003F1: "IA32_PEBS_ENABLE",
    0x000003F2: "PEBS_DATA_CFG",
    0x000004D0: "IA32_MCG_EXT_CTL",
    0x00000600: "IA32_DS_AREA",
    0x00000606: "RAPL_POWER_UNIT",
    0x00000611: "PKG_ENERGY_STATUS",
    0x000006A0: "IA32_U_CET",
    0x000006A2: "IA32_S_CET",
    0x000006A4: "IA32_PL0_SSP",
    0x000006A5: "IA32_PL1_SSP",
    0x000006A6: "IA32_PL2_SSP",
    0x000006A7: "IA32_PL3_SSP",
    0x000006A8: "IA32_INT_SSP_TAB",
    0x000006E0: "IA32_TSC_DEADLINE",
    0x00000770: "IA32_PM_ENABLE",
    0x00000771: "IA32_HWP_CAPABILITIES",
    0x00000774: "IA32_HWP_REQUEST",
    0x00000777: "IA32_HWP_STATUS",
    0x00000D90: "IA32_BNDCFGS",
    0x00000D93: "IA32_PASID",
    0x00000DA0: "IA32_XSS",
    # VMX capability MSRs (a nested hypervisor reads these).
    0x00000480: "IA32_VMX_BASIC",
    0x00000481: "IA32_VMX_PINBASED_CTLS",
    0x00000482: "IA32_VMX_PROCBASED_CTLS",
    0x00000483: "IA32_VMX_EXIT_CTLS",
    0x00000484: "IA32_VMX_ENTRY_CTLS",
    0x00000485: "IA32_VMX_MISC",
    0x00000486: "IA32_VMX_CR0_FIXED0",
    0x00000487: "IA32_VMX_CR0_FIXED1",
    0x00000488: "IA32_VMX_CR4_FIXED0",
    0x00000489: "IA32_VMX_CR4_FIXED1",
    0x0000048A: "IA32_VMX_VMCS_ENUM",
    0x0000048B: "IA32_VMX_PROCBASED_CTLS2",
    0x0000048C: "IA32_VMX_EPT_VPID_CAP",
    0x0000048D: "IA32_VMX_TRUE_PINBASED_CTLS",
    0x0000048E: "IA32_VMX_TRUE_PROCBASED_CTLS",
    0x0000048F: "IA32_VMX_TRUE_EXIT_CTLS",
    0x00000490: "IA32_VMX_TRUE_ENTRY_CTLS",
    0x00000491: "IA32_VMX_VMFUNC",
    0x00000492: "IA32_VMX_PROCBASED_CTLS3",
    # x86-64 and AMD (msr-index.h).
    0xC0000080: "EFER",
    0xC0000081: "STAR",
    0xC0000082: "LSTAR",
    0xC0000083: "CSTAR",
    0xC0000084: "SFMASK (SYSCALL_MASK)",
    0xC0000100: "FS_BASE",
    0xC0000101: "GS_BASE",
    0xC0000102: "KERNEL_GS_BASE",
    0xC0000103: "TSC_AUX",
    0xC0000104: "AMD64_TSC_RATIO",
    0xC000010E: "AMD64_LBR_SELECT",
    0xC000010F: "AMD_DBG_EXTN_CFG",
    0xC00000E9: "AMD_IRPERF",
    0xC0000300: "AMD64_PERF_CNTR_GLOBAL_STATUS",
    0xC0000301: "AMD64_PERF_CNTR_GLOBAL_CTL",
    0xC0000302: "AMD64_PERF_CNTR_GLOBAL_STATUS_CLR",
    0xC0010010: "AMD64_SYSCFG",
    0xC0010015: "AMD_HWCR",
    0xC001001A: "AMD_TOP_MEM",
    0xC001001B: "AMD_CLK_CTL",
    0xC001001D: "AMD_TOP_MEM2",
    0xC001001F: "AMD64_NB_CFG",
    0xC0010020: "AMD64_PATCH_LOADER",
    0xC0010055: "AMD_INT_PENDING_MSG",
    0xC0010058: "AMD_MMIO_CONF_BASE",
    0xC0010062: "AMD_PSTATE_CTL",
    0xC0010063: "AMD_PSTATE_STATUS",
    **{0xC0010064 + n: f"AMD_PSTATE_DEF{n}" for n in range(8)},
    0xC0010112: "AMD_TSEG_ADDR",
    0xC0010113: "AMD_TSEG_MASK",
    0xC0010114: "AMD_VM_CR",
    0xC0010115: "AMD_VM_IGNNE",
    0xC0010117: "AMD_VM_HSAVE_PA",
    0xC001011B: "AMD64_SVM_AVIC_DOORBELL",
    0xC001011E: "AMD64_VM_PAGE_FLUSH",
    0xC001011F: "AMD64_VIRT_SPEC_CTRL",
    0xC0010130: "AMD64_SEV_ES_GHCB",
    0xC0010131: "AMD64_SEV_STATUS",
    0xC0010140: "AMD64_OSVW_ID_LENGTH",
    0xC0010141: "AMD64_OSVW_STATUS",
    0xC0010299: "AMD_RAPL_POWER_UNIT",
    0xC001029A: "AMD_CORE_ENERGY_STATUS",
    0xC001029B: "AMD_PKG_ENERGY_STATUS",
    0xC0011020: "AMD64_LS_CFG",
    0xC0011022: "AMD64_DC_CFG",
    0xC0011029: "AMD64_DE_CFG",
    # kvm_para.h: legacy kvmclock MSRs (deprecated) and the 0x4b564dxx range.
    0x00000011: "KVM_WALL_CLOCK",
    0x00000012: "KVM_SYSTEM_TIME",
    0x4B564D00: "KVM_WALL_CLOCK_NEW",
    0x4B564D01: "KVM_SYSTEM_TIME_NEW",
    0x4B564D02: "KVM_ASYNC_PF_EN",
    0x4B564D03: "KVM_STEAL_TIME",
    0x4B564D04: "KVM_PV_EOI_EN",
    0x4B564D05: "KVM_POLL_CONTROL",
    0x4B564D06: "KVM_ASYNC_PF_INT",
    0x4B564D07: "KVM_ASYNC_PF_ACK",
    0x4B564D08: "KVM_MIGRATION_CONTROL",
    # hyperv-tlfs.h (HV_X64_MSR_*).
    0x40000000: "HV_GUEST_OS_ID",
    0x40000001: "HV_HYPERCALL",
    0x40000002: "HV_VP_INDEX",
    0x40000003: "HV_RESET",
    0x40000010: "HV_VP_RUNTIME",
    0x40000020: "HV_TIME_REF_COUNT",
    0x40000021: "HV_REFERENCE_TSC",
    0x40000022: "HV_TSC_FREQUENCY",
    0x40000023: "HV_APIC_FREQUENCY",
    0x40000070: "HV_EOI",
    0x40000071: "HV_ICR",
    0x40000072: "HV_TPR",
    0x40000073: "HV_VP_ASSIST_PAGE",
    0x40000080: "HV_SCONTROL",
    0x40000081: "HV_SVERSION",
    0x40000082: "HV_SIEFP",
    0x40000083: "HV_SIMP",
    0x40000084: "HV_EOM",
    **{0x40000090 + n: f"HV_SINT{n}" for n in range(16)},
    **{0x400000B0 + 2 * n: f"HV_STIMER{n}_CONFIG" for n in range(4)},
    **{0x400000B1 + 2 * n: f"HV_STIMER{n}_COUNT" for n in range(4)},
    0x400000F0: "HV_GUEST_IDLE",
    0x400000F1: "HV_SYNDBG_CONTROL",
    0x400000F2: "HV_SYNDBG_STATUS",
    0x400000F3: "HV_SYNDBG_SEND_BUFFER",
    0x400000F4: "HV_SYNDBG_RECV_BUFFER",
    0x400000F5: "HV_SYNDBG_PENDING_BUFFER",
    0x400000FF: "HV_SYNDBG_OPTIONS",
    **{0x40000100 + n: f"HV_CRASH_P{n}" for n in range(5)},
    0x40000105: "HV_CRASH_CTL",
    0x40000106: "HV_REENLIGHTENMENT_CONTROL",
    0x40000107: "HV_TSC_EMULATION_CONTROL",
    0x40000108: "HV_TSC_EMULATION_STATUS",
    0x40000118: "HV_TSC_INVARIANT_CONTROL",
}

_MC_REGS = ("CTL", "STATUS", "ADDR", "MISC")


def _ranged_msr(index: int) -> str:
    """Names of MSRs that come in numbered banks."""
    if 0x800 <= index <= 0x8FF:
        # APR, DFR and ICR2 have no x2APIC MSR (the ICR is 64 bits wide at 0x830).
        reg = None if index in (0x809, 0x80E, 0x831) else APIC_REGS.get((index - X2APIC_BASE) << 4)
        return f"x2APIC {reg}" if reg else "x2APIC (reserved)"
    if 0xC1 <= index <= 0xC8:
        return f"IA32_PMC{index - 0xC1}"
    if 0x186 <= index <= 0x18D:
        return f"IA32_PERFEVTSEL{index - 0x186}"
    if 0x200 <= index <= 0x21F:
        kind = "MASK" if index & 1 else "BASE"
        return f"IA32_MTRR_PHYS{kind}{(index - 0x200) // 2}"
    if 0x280 <= index <= 0x29F:
        return f"IA32_MC{index - 0x280}_CTL2"
    if 0x309 <= index <= 0x30C:
        return f"IA32_FIXED_CTR{index - 0x309}"
    if 0x400 <= index <= 0x47F:
        bank, which = divmod(index - 0x400, 4)
        return f"IA32_MC{bank}_{_MC_REGS[which]}"
    if 0x4C1 <= index <= 0x4C8:
        return f"IA32_A_PMC{index - 0x4C1}"
    if 0xC0010000 <= index <= 0xC0010003:
        return f"AMD_PERF_CTL{index - 0xC0010000} (legacy)"
    if 0xC0010004 <= index <= 0xC0010007:
        return f"AMD_PERF_CTR{index - 0xC0010004} (legacy)"
    if 0xC0010200 <= index <= 0xC001020B:
        n, odd = divmod(index - 0xC0010200, 2)
        return f"AMD_PERF_{'CTR' if odd else 'CTL'}{n}"
    return ""


def msr_name(index: int) -> str:
    """Name of MSR ``index`` (``"IA32_TSC_DEADLINE"``, ``"x2APIC ICR"``); ``""`` if unknown."""
    return _MSRS.get(index) or _ranged_msr(index)


TIMER_MSRS = frozenset(
    {
        0x10,  # IA32_TSC
        0x3B,  # IA32_TSC_ADJUST
        0x6E0,  # IA32_TSC_DEADLINE
        0x11,  # KVM_WALL_CLOCK
        0x12,  # KVM_SYSTEM_TIME
        0x4B564D00,  # KVM_WALL_CLOCK_NEW
        0x4B564D01,  # KVM_SYSTEM_TIME_NEW
        0x40000020,  # HV_TIME_REF_COUNT
        0x40000021,  # HV_REFERENCE_TSC
        *range(0x400000B0, 0x400000B8),  # HV_STIMER0-3 CONFIG/COUNT
        *(X2APIC_BASE + (off >> 4) for off in APIC_TIMER_REGS),  # x2APIC timer registers
    }
)
"""MSRs that read or program a clock source or a timer."""
