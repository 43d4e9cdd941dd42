"""A VM-exit profile: what one guest's vCPUs left guest mode for, during one window.

Every provider (kernel tracepoints, QMP ``query-stats``, an imported ``perf kvm stat``
report) fills the same :class:`Profile`; what a provider cannot know stays ``None`` or
empty, and ``Profile.provider`` names where the numbers came from. Exit reasons keep their
vendor names (SVM's ``io``, VMX's ``IO_INSTRUCTION``) and carry a vendor-neutral ``kind``
(``io``, ``msr_write``, ``hlt``, ...) that the diagnosis rules match on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvmlab.jsondoc import envelope, opened

KIND = "exits"
"""The JSON document's kind: ``kvmlab.exits/1`` (docs/json-output.md, ``kvmlab exits -o
json``; :mod:`kvmlab.jsondoc`)."""


@dataclass
class ReasonStat:
    """One exit reason: how often, and how long KVM took to handle it (ns; None if unknown)."""

    reason: str
    kind: str
    count: int
    time_ns: int | None = None
    min_ns: int | None = None
    max_ns: int | None = None

    @property
    def avg_ns(self) -> float | None:
        """Mean handling time."""
        return None if self.time_ns is None or not self.count else self.time_ns / self.count


@dataclass
class PioStat:
    """Port I/O exits for one port and direction."""

    port: int
    write: bool
    count: int
    size: int | None = None
    name: str = ""


@dataclass
class MsrStat:
    """MSR exits for one MSR index and direction."""

    index: int
    write: bool
    count: int
    name: str = ""


@dataclass
class MmioStat:
    """MMIO (or nested page fault) exits for one guest-physical address and direction."""

    gpa: int
    write: bool
    count: int
    name: str = ""


@dataclass
class Folded:
    """Rows of an imported table beyond the most frequent ones it keeps: how many, and
    their exits (exit reasons are summed into one row per kind, ports and addresses left
    out)."""

    rows: int
    count: int


@dataclass
class Skipped:
    """Rows of an imported report left out as impossible (a negative count, one over
    2**63-1): how many, and the first of them (line, name, why)."""

    rows: int
    line: int
    name: str
    why: str


@dataclass
class CpuWindow:
    """The two ``top``s (host and guest) of the idle-guest exit-storm write-up for the same
    window, in seconds of CPU time.

    ``host_*`` come from the QEMU process's threads (``/proc/PID/task/*/stat``, on the host
    the guest runs on); ``guest_busy`` and ``guest_total`` from the guest's own ``/proc/stat``
    (non-idle and all jiffies of every CPU, in seconds).
    """

    seconds: float
    host_user: float
    host_system: float
    host_guest: float
    guest_busy: float | None = None
    guest_total: float | None = None
    threads: dict[str, float] = field(default_factory=dict)
    """Each thread's CPU seconds (``name (tid)``)."""
    thread_split: dict[str, dict[str, float]] = field(default_factory=dict)
    """Each thread's seconds in guest mode, in the host kernel and in QEMU's user space
    (``guest``, ``kernel``, ``qemu_user``)."""

    @property
    def host_percent(self) -> float:
        """QEMU's CPU use as ``top`` shows it (100 = one host CPU)."""
        return 100 * (self.host_user + self.host_system) / self.seconds if self.seconds else 0.0

    @property
    def guest_percent(self) -> float | None:
        """The guest's own CPU use (100 = one of its vCPUs busy), as its ``top`` shows it."""
        if self.guest_busy is None:
            return None
        return 100 * self.guest_busy / self.seconds if self.seconds else 0.0

    @property
    def gap_percent(self) -> float | None:
        """Host CPU the guest does not see as its own work: exits, emulation, I/O threads."""
        guest = self.guest_percent
        return None if guest is None else self.host_percent - guest


@dataclass
class Profile:
    """Exits of one guest over ``seconds``, from one provider."""

    address: str
    provider: str
    provider_note: str
    seconds: float
    vendor: str = ""  # "svm", "vmx" or "" when unknown
    reasons: list[ReasonStat] = field(default_factory=list)
    vcpus: dict[int, int] = field(default_factory=dict)
    pio: list[PioStat] = field(default_factory=list)
    msr: list[MsrStat] = field(default_factory=list)
    mmio: list[MmioStat] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    cpu: CpuWindow | None = None
    partial: str | None = None
    dropped: int = 0
    notes: list[str] = field(default_factory=list)
    folded: dict[str, Folded] = field(default_factory=dict)  # "reasons", "pio", "mmio"
    skipped: Skipped | None = None

    @property
    def total(self) -> int:
        """All exits in the window (by reason, or the ``exits`` counter)."""
        if self.reasons:
            return sum(r.count for r in self.reasons)
        return self.counters.get("exits", 0)

    def rate(self, count: int) -> float:
        """Per second over the window."""
        return count / self.seconds if self.seconds else 0.0

    def kind_count(self, kind: str) -> int:
        """Exits of one vendor-neutral kind (``io``, ``msr_read``, ``hlt``, ...)."""
        return sum(r.count for r in self.reasons if r.kind == kind)

    def sorted_reasons(self) -> list[ReasonStat]:
        """Reasons, most frequent first."""
        return sorted(self.reasons, key=lambda r: (-r.count, r.reason))

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form."""
        out = asdict(self)
        out["total"] = self.total
        for row, stat in zip(out["reasons"], self.reasons, strict=True):
            row["avg_ns"] = stat.avg_ns
            row["rate"] = self.rate(stat.count)
            row["share"] = stat.count / self.total if self.total else 0.0
        if self.cpu is not None:
            out["cpu"].update(
                host_percent=self.cpu.host_percent,
                guest_percent=self.cpu.guest_percent,
                gap_percent=self.cpu.gap_percent,
            )
        out["vcpus"] = {str(k): v for k, v in self.vcpus.items()}
        return envelope(KIND, out)


def from_json(data: dict[str, Any]) -> Profile:
    """A profile back from its JSON form (the inner kvmlab's answer)."""
    data = opened(data, KIND)
    fields = {k: v for k, v in data.items() if k in Profile.__dataclass_fields__}
    fields["reasons"] = [
        ReasonStat(**{k: v for k, v in r.items() if k in ReasonStat.__dataclass_fields__})
        for r in data["reasons"]
    ]
    fields["pio"] = [PioStat(**p) for p in data["pio"]]
    fields["msr"] = [MsrStat(**m) for m in data["msr"]]
    fields["mmio"] = [MmioStat(**m) for m in data["mmio"]]
    fields["vcpus"] = {int(k): v for k, v in data["vcpus"].items()}
    fields["folded"] = {k: Folded(**v) for k, v in (data.get("folded") or {}).items()}
    skipped = data.get("skipped")
    fields["skipped"] = None if skipped is None else Skipped(**skipped)
    cpu = data.get("cpu")
    fields["cpu"] = (
        None
        if cpu is None
        else CpuWindow(**{k: v for k, v in cpu.items() if k in CpuWindow.__dataclass_fields__})
    )
    return Profile(**fields)
