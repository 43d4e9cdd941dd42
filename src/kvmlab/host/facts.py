"""Parsed host facts shared by the checks: CPU, kernel command line, mounts, KVM modules."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from kvmlab.host.probe import HostProbe

Flavour = Literal["kvm_intel", "kvm_amd", "kvm_pvm", "none"]
HARDWARE_FLAVOURS: tuple[Flavour, ...] = ("kvm_intel", "kvm_amd")
# kvm_pvm first: when it is loaded /dev/kvm is PVM's, whatever else is there.
FLAVOUR_ORDER: tuple[Flavour, ...] = ("kvm_pvm", "kvm_intel", "kvm_amd")

CPUINFO = "/proc/cpuinfo"
CMDLINE = "/proc/cmdline"
MOUNTS = "/proc/mounts"
MEMINFO = "/proc/meminfo"
CPU_ONLINE = "/sys/devices/system/cpu/online"
MODPROBE_D = "/etc/modprobe.d"


@dataclass(frozen=True)
class CpuInfo:
    """The first processor's entry of /proc/cpuinfo."""

    vendor: str
    model: str
    flags: frozenset[str]
    vmx_flags: frozenset[str]

    @property
    def is_intel(self) -> bool:
        return self.vendor == "GenuineIntel"

    @property
    def is_amd(self) -> bool:
        return self.vendor in ("AuthenticAMD", "HygonGenuine")

    @property
    def virt_flag(self) -> str | None:
        """``vmx`` or ``svm`` when the CPU offers hardware virtualization."""
        return next((f for f in ("vmx", "svm") if f in self.flags), None)

    @property
    def under_hypervisor(self) -> bool:
        return "hypervisor" in self.flags

    def has(self, flag: str) -> bool:
        """Whether ``flag`` is in ``flags`` or in ``vmx flags`` (newer kernels list EPT there)."""
        return flag in self.flags or flag in self.vmx_flags


def cpu_info(probe: HostProbe) -> CpuInfo | None:
    """Parse the first processor of /proc/cpuinfo; None when the file is missing."""
    text = probe.read(CPUINFO)
    if text is None:
        return None
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return CpuInfo(
        vendor=fields.get("vendor_id", "unknown"),
        model=fields.get("model name", "unknown"),
        flags=frozenset(fields.get("flags", "").split()),
        vmx_flags=frozenset(fields.get("vmx flags", "").split()),
    )


MAX_CPU = 8191
"""The largest CPU number Linux has (NR_CPUS is at most 8192): a list read from a recorded
tree or the kernel command line never expands past it."""

_CPU_RANGE = re.compile(r"^([0-9]{1,12})(?:-([0-9]{1,12}))?$")


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8`` -> [0, 1, 2, 3, 8]; words that are not CPU ranges (``managed_irq``) and
    CPUs above :data:`MAX_CPU` are ignored."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        match = _CPU_RANGE.match(part.strip())
        if match is None:
            continue
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        cpus.update(range(lo, min(hi, MAX_CPU) + 1))
    return sorted(cpus)


def format_cpulist(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> ``0-2,5``."""
    ranges: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if ranges and ranges[-1][1] == cpu - 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges)


def online_cpus(probe: HostProbe) -> list[int]:
    """Online CPUs from sysfs (recorded trees keep only 1-2 cpuinfo entries)."""
    text = probe.read(CPU_ONLINE)
    if text is not None:
        return parse_cpulist(text)
    return list(range((probe.read(CPUINFO) or "").count("\nprocessor") + 1))


def cmdline_params(probe: HostProbe) -> dict[str, str]:
    """Kernel parameters from /proc/cmdline (``name -> value``, ``""`` for bare flags).

    Arguments after ``--`` belong to init and are left out.
    """
    params: dict[str, str] = {}
    for token in (probe.read(CMDLINE) or "").split():
        if token == "--":
            break
        name, _, value = token.partition("=")
        params[name] = value
    return params


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    fstype: str
    options: tuple[str, ...]

    def option(self, name: str) -> str | None:
        prefix = f"{name}="
        return next((o.removeprefix(prefix) for o in self.options if o.startswith(prefix)), None)


def mounts(probe: HostProbe) -> list[Mount]:
    """Entries of /proc/mounts."""
    result: list[Mount] = []
    for line in (probe.read(MOUNTS) or "").splitlines():
        parts = line.split()
        if len(parts) >= 4:
            target = parts[1].replace("\\040", " ")
            result.append(Mount(parts[0], target, parts[2], tuple(parts[3].split(","))))
    return result


def meminfo_kb(probe: HostProbe) -> dict[str, int]:
    """/proc/meminfo as ``name -> kB`` (counts such as HugePages_Total stay counts)."""
    info: dict[str, int] = {}
    for line in (probe.read(MEMINFO) or "").splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            info[name.strip()] = int(words[0])
    return info


def module_loaded(probe: HostProbe, module: str) -> bool:
    """Whether ``module`` is loaded (or built in): /sys/module/<module> exists."""
    return probe.is_dir(f"/sys/module/{module}")


def param_path(module: str, name: str) -> str:
    return f"/sys/module/{module}/parameters/{name}"


def module_param(probe: HostProbe, module: str, name: str) -> str | None:
    """A module parameter's current value, or None when it does not exist."""
    return probe.read_value(param_path(module, name))


def is_on(value: str | None) -> bool | None:
    """Y/1 -> True, N/0 -> False, anything else (or None) -> None."""
    if value is None:
        return None
    v = value.strip().upper()
    if v in ("Y", "1", "ON", "YES", "TRUE"):
        return True
    if v in ("N", "0", "OFF", "NO", "FALSE"):
        return False
    return None


def kvm_flavour(probe: HostProbe) -> Flavour:
    """Which KVM provides /dev/kvm: kvm_pvm, kvm_intel, kvm_amd or none."""
    return next((f for f in FLAVOUR_ORDER if module_loaded(probe, f)), "none")


def vendor_module(cpu: CpuInfo | None) -> Flavour | None:
    """The hardware KVM module this CPU would use (kvm_intel for vmx, kvm_amd for svm)."""
    if cpu is None:
        return None
    if cpu.virt_flag == "vmx" or (cpu.virt_flag is None and cpu.is_intel):
        return "kvm_intel"
    if cpu.virt_flag == "svm" or (cpu.virt_flag is None and cpu.is_amd):
        return "kvm_amd"
    return None


@dataclass(frozen=True)
class ModprobeOption:
    """One ``options <module> name=value`` setting found in /etc/modprobe.d."""

    file: str
    module: str
    name: str
    value: str


def modprobe_options(probe: HostProbe, module: str) -> list[ModprobeOption]:
    """Options set for ``module`` (``kvm-intel`` and ``kvm_intel`` alike) in /etc/modprobe.d."""
    want = module.replace("-", "_")
    found: list[ModprobeOption] = []
    for name in probe.listdir(MODPROBE_D):
        if not name.endswith(".conf"):
            continue
        path = f"{MODPROBE_D}/{name}"
        for line in (probe.read(path) or "").splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) >= 3 and words[0] == "options" and words[1].replace("-", "_") == want:
                for word in words[2:]:
                    key, _, value = word.partition("=")
                    found.append(ModprobeOption(path, want, key, value))
    return found
