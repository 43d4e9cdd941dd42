"""CPU, memory, pinning, clock and Hyper-V tables of a guest."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kvmlab.spec.base import SpecModel
from kvmlab.spec.units import CpuSet, MemorySize, quoted

CPU_MODES = ("host-passthrough", "host-model")
MAX_VCPUS = 288
"""The most vCPUs a guest has (QEMU's q35 limit kvmlab takes); no topology count is more."""
MAX_CPU_NAME = 64
"""The longest CPU model or feature name (QEMU's are at most about 30 characters)."""


def _cpu_name(name: str) -> bool:
    """Whether ``name`` can be a QEMU CPU model or feature name: ASCII letters, digits,
    '-', '_' and '.', at most :data:`MAX_CPU_NAME` characters."""
    return 0 < len(name) <= MAX_CPU_NAME and all(
        c.isascii() and (c.isalnum() or c in "-_.") for c in name
    )


class Cpu(SpecModel):
    """The virtual CPU: model, extra features and topology."""

    model: str = "host-passthrough"
    """QEMU CPU model (e.g. `Haswell-noTSX`, `EPYC`, `max`) or `host-passthrough` / `host-model`.
    Under TCG, `host-passthrough` becomes QEMU's `max` (libvirt `maximum`)."""

    features: list[str] = []
    """Feature flags added (`+vmx`) or removed (`-svm`), as QEMU and libvirt name them."""

    sockets: int | None = Field(default=None, ge=1, le=MAX_VCPUS)
    """Sockets; when any of sockets/cores/threads is set, their product must equal `vcpus`."""

    cores: int | None = Field(default=None, ge=1, le=MAX_VCPUS)
    """Cores per socket."""

    threads: int | None = Field(default=None, ge=1, le=MAX_VCPUS)
    """Threads per core."""

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str) -> str:
        if not _cpu_name(value):
            raise ValueError(
                f"{quoted(value)} is not a CPU model name: give one QEMU knows (e.g. "
                f"'EPYC', 'Haswell-noTSX', 'max'): ASCII letters, digits, '-', '_' and '.', "
                f"at most {MAX_CPU_NAME}"
            )
        return value

    @field_validator("features")
    @classmethod
    def _feature_flags(cls, value: list[str]) -> list[str]:
        for flag in value:
            name = flag[1:]
            if flag[:1] not in "+-" or not _cpu_name(name):
                raise ValueError(f"{quoted(flag)} is not a feature flag; write '+vmx' or '-svm'")
        names = [f[1:] for f in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"feature {dupes[0]!r} is given more than once")
        return value

    @property
    def topology_given(self) -> bool:
        """Whether the lab file sets any of sockets, cores, threads."""
        return any(v is not None for v in (self.sockets, self.cores, self.threads))


class NumaCell(SpecModel):
    """One guest NUMA node."""

    cpus: CpuSet
    """vCPUs of this node, e.g. `"0-1"`."""

    memory: MemorySize
    """Memory of this node, e.g. `"1G"`."""

    mem_access: Literal["private", "shared"] = "private"
    """`shared` maps this node's RAM shared (libvirt `memAccess`), as vhost-user needs."""


HugepageSize = Literal["2M", "1G"]
HUGEPAGE_BYTES = {"2M": 2 * 1024 * 1024, "1G": 1024 * 1024 * 1024}


class Memory(SpecModel):
    """Guest RAM: size, backing and NUMA layout. `memory = "2G"` is short for `memory.size`."""

    size: MemorySize = 1024 * 1024 * 1024
    """RAM size: `"2G"`, `"512M"`, or an integer MiB count as in QEMU's `-m`."""

    backing: Literal["anonymous", "memfd", "hugepages"] = "anonymous"
    """`anonymous` (plain RAM), `memfd` (a memfd, shareable), or `hugepages` (hugetlb memfd)."""

    hugepage_size: str = "2M"
    """Huge page size for `backing = "hugepages"`: `2M` or `1G` (x86_64)."""

    shared: bool = False
    """Map RAM MAP_SHARED so another process can map it (vhost-user, virtiofs)."""

    prealloc: bool = False
    """Allocate all RAM at start (recommended with hugepages and for packet processing)."""

    numa: list[NumaCell] = []
    """Guest NUMA nodes; their memory must add up to `size` and their CPUs cover every vCPU."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str | int) and not isinstance(value, bool):
            return {"size": value}
        return value

    @field_validator("hugepage_size")
    @classmethod
    def _page_size(cls, value: str) -> str:
        if value not in HUGEPAGE_BYTES:
            raise ValueError(f"huge page size {value!r} is not supported on x86_64; use 2M or 1G")
        return value

    @property
    def shared_anywhere(self) -> bool:
        """Whether any of guest RAM is mapped shared."""
        return self.shared or any(c.mem_access == "shared" for c in self.numa)


class Pinning(SpecModel):
    """Host CPUs for vCPU threads and for QEMU's emulator threads (libvirt `<cputune>`)."""

    vcpus: dict[str, CpuSet] = {}
    """vCPU number to host CPU set, e.g. `{ 0 = "2", 1 = "3" }`."""

    emulator: CpuSet | None = None
    """Host CPU set for the emulator (main loop and I/O) threads."""


class Timer(SpecModel):
    """One guest timer device."""

    present: bool | None = None
    """Whether the guest has this timer; unset keeps the machine type's default."""

    tickpolicy: Literal["delay", "catchup", "merge", "discard"] | None = None
    """What to do with missed ticks (rtc: `catchup`; pit: `delay`), as in libvirt."""


class Timers(SpecModel):
    """The guest's timers, as in libvirt's `<clock>` section (where the idle-guest
    exit-storm write-up turns the HPET on)."""

    rtc: Timer = Timer()
    """The real-time clock (CMOS RTC)."""
    pit: Timer = Timer()
    """The i8254 programmable interval timer."""
    hpet: Timer = Timer()
    """The high precision event timer; Windows guests may need it present (without one, an
    idle Windows 10 guest can burn host CPU in an RTC port exit storm)."""
    kvmclock: Timer = Timer()
    """The KVM paravirtual clock (KVM only)."""
    hypervclock: Timer = Timer()
    """The Hyper-V reference time counter (`hv-time`) for Windows guests."""


class Clock(SpecModel):
    """Guest clock: offset and timers."""

    offset: Literal["utc", "localtime"] = "utc"
    """The RTC's base: `utc` for Linux, `localtime` for Windows."""

    timers: Timers = Timers()
    """Per-timer presence and tick policy."""


HypervFeature = Literal[
    "relaxed",
    "vapic",
    "spinlocks",
    "vpindex",
    "runtime",
    "synic",
    "stimer",
    "reset",
    "frequencies",
    "reenlightenment",
    "tlbflush",
    "ipi",
    "evmcs",
]

HYPERV_NEEDS: dict[str, tuple[str, ...]] = {
    "synic": ("vpindex",),
    "stimer": ("synic", "time"),
    "tlbflush": ("vpindex",),
    "ipi": ("vpindex",),
    "evmcs": ("vapic",),
}
"""Enlightenments QEMU refuses without others (``time`` is the hypervclock timer)."""


class HyperV(SpecModel):
    """Hyper-V enlightenments for Windows guests."""

    features: list[HypervFeature] = []
    """Enlightenments to enable, e.g. `["relaxed", "vapic", "spinlocks", "vpindex", "synic"]`."""

    spinlock_retries: int = Field(default=8191, ge=4095, le=0xFFFFFFFF)
    """Retries before a spinlock notification, with `spinlocks` (QEMU's minimum is 4095)."""
