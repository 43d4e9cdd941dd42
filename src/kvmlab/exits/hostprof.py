"""Where a guest's QEMU spends its host CPU, sampled: the ``perf kvm --host top`` of the
idle-guest exit-storm write-up.

``hostprof.sh`` samples the QEMU process with the software clock (``perf record -e
cpu-clock -F RATE -g -p PID``) where it runs and prints ``perf report`` by thread, shared
object and symbol, with each thread's ``/proc`` times around the window. Every sample is
put in one class:

- ``guest``: the vCPU was in guest mode. The clock's interrupt ends guest mode and KVM
  takes it between ``kvm_before_interrupt()`` and ``kvm_after_interrupt()``, so perf
  reports the guest's instruction pointer and marks the sample as the guest's
  (``kvm_arch_pmi_in_guest()`` in arch/x86/include/asm/kvm_host.h; commit dd60d217062f4,
  "KVM: x86: Fix perf timer mode IP reporting"); ``perf kvm --guest`` shows it as
  ``[g]``/``[u]``, plain ``perf report`` hides it. Kernels without that leave the sample
  on KVM's VM-entry functions (:data:`VM_ENTRY`: ``svm_vcpu_run``, ``vmx_vcpu_run``, ...),
  which count as guest mode too.
- ``kernel``: the host kernel on QEMU's behalf (``[k]``): exits KVM handles, halt polling,
  system calls, I/O.
- ``qemu_user``: QEMU's own user space (``[.]``): device emulation, its main loop, and
  under TCG the guest's translated code (``[unknown]`` rows of the vCPU threads).

Everything here is parsing and arithmetic on the script's output, so it is tested on
output recorded from real processes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from kvmlab import __version__
from kvmlab.exits.perfreport import Report, Row, parse
from kvmlab.jsondoc import schema_of
from kvmlab.runtime.thread_cpu import VCPU, ThreadTimes, parse_stats, role, thread_use

KIND = "host-profile"
"""The JSON document's kind: ``kvmlab.host-profile/1``."""
"""Version of the JSON form (docs/json-output.md, ``kvmlab exits --host-profile``)."""
CLASSES = ("guest", "kernel", "qemu_user")
UNATTRIBUTED = "unattributed"
"""Sampled time perf shows in no row (samples it filtered out): the gap to 100%."""
VM_ENTRY = frozenset(
    {
        "svm_vcpu_run",
        "__svm_vcpu_run",
        "svm_vcpu_enter_exit",
        "__svm_sev_es_vcpu_run",
        "svm_handle_external_intr",
        "vmx_vcpu_run",
        "__vmx_vcpu_run",
        "vmx_vcpu_enter_exit",
        "vmx_handle_external_intr",
        "vmx_do_interrupt_irqoff",
        "vmx_do_interrupt_nmi_irqoff",
        "handle_external_interrupt_irqoff",
    }
)
"""KVM's VM-entry path: a clock sample of a vCPU in guest mode lands here on kernels that
do not mark it as a guest sample (the interrupt that ended guest mode is taken here)."""
TOP_SYMBOLS = 40
"""Symbols in the JSON form (the busiest; every class and thread is summed in full)."""
TOP_PER_THREAD = 5
NOISE_PCT = 0.5
"""A gap to 100% below this is perf's rounding of each row to 0.01%."""
_SECTION = re.compile(r"^=== (perf-version|threads-start|threads-end|report)(?: (.*))?$")


@dataclass(frozen=True)
class Sample:
    """One row of the report as kvmlab reads it: a thread's self time in one symbol."""

    tid: int | None
    thread: str
    role: str
    dso: str
    symbol: str
    level: str
    cls: str
    samples: int
    seconds: float
    share: float
    """Of all the samples' time in the window, 0-1."""

    def to_json(self) -> dict[str, Any]:
        """The row for ``-o json``."""
        return {
            "tid": self.tid,
            "thread": self.thread,
            "role": self.role,
            "dso": self.dso,
            "symbol": self.symbol,
            "level": self.level,
            "class": self.cls,
            "samples": self.samples,
            "seconds": round(self.seconds, 4),
            "share": round(self.share, 4),
        }


@dataclass
class ThreadProfile:
    """One QEMU thread: its sampled time by class, and ``/proc``'s split of it."""

    tid: int | None
    name: str
    role: str
    samples: int = 0
    seconds: float = 0.0
    classes: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0.0))
    """Seconds per class."""
    proc: dict[str, float] | None = None
    """``guest_pct``, ``kernel_pct``, ``qemu_user_pct`` from ``/proc`` (100 = one CPU)."""

    @property
    def kvm_vcpu(self) -> bool:
        """A KVM vCPU thread (``CPU N/KVM``)."""
        m = VCPU.match(self.name)
        return m is not None and m[2] == "KVM"

    def share(self, cls: str) -> float:
        """Share of this thread's sampled time in ``cls``, 0-1."""
        return self.classes.get(cls, 0.0) / self.seconds if self.seconds else 0.0


@dataclass
class HostProfile:
    """A guest's QEMU over one sampled window, where that QEMU runs."""

    address: str
    where: str
    """``this host`` or ``inside LAB/GUEST`` (the guest hypervisor its QEMU runs in)."""
    accel: str
    seconds: float
    rate: int
    command: str
    pid: int | None = None
    """QEMU's process id where it runs (its main thread's id)."""
    perf_version: str = ""
    event: str = ""
    samples: int = 0
    sampled_seconds: float = 0.0
    """The samples' time: the periods' sum (CPU seconds of QEMU's threads)."""
    lost: int = 0
    rows: list[Sample] = field(default_factory=list)
    """Every row with samples, busiest first."""
    inclusive: dict[tuple[int | None, str], float] = field(default_factory=dict)
    """Seconds under each kernel function by thread (its ``Children``: call chains)."""
    threads: list[ThreadProfile] = field(default_factory=list)
    unattributed: float = 0.0
    """Seconds perf showed in no row."""
    guest_cpu: float | None = None
    """The guest's own CPU use over the window, % (100 = one vCPU), from its /proc/stat."""
    proc_seconds: float = 0.0
    """The /proc window around the sampled one (perf starts inside it)."""
    notes: list[str] = field(default_factory=list)
    partial: str | None = None

    @property
    def has_callchains(self) -> bool:
        """Whether the report had ``Children`` (the call chains ``under`` groups need)."""
        return bool(self.inclusive) or not self.rows

    def class_seconds(self, cls: str) -> float:
        """Sampled seconds in ``cls`` (or :data:`UNATTRIBUTED`)."""
        if cls == UNATTRIBUTED:
            return self.unattributed
        return sum(r.seconds for r in self.rows if r.cls == cls)

    def cpu_percent(self, seconds: float) -> float:
        """``seconds`` of CPU in the window as % of one host CPU."""
        return 100 * seconds / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form (without findings: the caller adds them)."""
        total = self.sampled_seconds

        def part(seconds: float, samples: int | None, whole: float) -> dict[str, Any]:
            out: dict[str, Any] = {
                "seconds": round(float(seconds), 4),
                "share": round(seconds / whole, 4) if whole else 0.0,
                "cpu_percent": round(self.cpu_percent(seconds), 2),
            }
            if samples is not None:
                out["samples"] = samples
            return out

        classes = {
            cls: part(
                self.class_seconds(cls), sum(r.samples for r in self.rows if r.cls == cls), total
            )
            for cls in CLASSES
        }
        classes[UNATTRIBUTED] = part(self.unattributed, None, total)
        threads = []
        for t in self.threads:
            mine = [r for r in self.rows if r.tid == t.tid and r.thread == t.name]
            threads.append(
                {
                    "tid": t.tid,
                    "name": t.name,
                    "role": t.role,
                    "samples": t.samples,
                    "seconds": round(t.seconds, 4),
                    "cpu_percent": round(self.cpu_percent(t.seconds), 2),
                    "classes": {
                        cls: part(
                            t.classes[cls],
                            sum(r.samples for r in mine if r.cls == cls),
                            t.seconds,
                        )
                        for cls in CLASSES
                    },
                    "top": [r.to_json() for r in mine[:TOP_PER_THREAD]],
                    "proc": t.proc,
                }
            )
        return {
            "schema": schema_of(KIND),
            "kvmlab": __version__,
            "address": self.address,
            "where": self.where,
            "accel": self.accel,
            "seconds": self.seconds,
            "rate_hz": self.rate,
            "perf": {"command": self.command, "version": self.perf_version, "event": self.event},
            "samples": self.samples,
            "sampled_seconds": round(self.sampled_seconds, 4),
            "cpu_percent": round(self.cpu_percent(self.sampled_seconds), 2),
            "lost_samples": self.lost,
            "guest_cpu_percent": None if self.guest_cpu is None else round(self.guest_cpu, 2),
            "classes": classes,
            "threads": threads,
            "symbols": [r.to_json() for r in self.rows[:TOP_SYMBOLS]],
            "notes": list(self.notes),
            "partial": self.partial,
        }


def classify(row: Row) -> str:
    """The class of a row's samples (see the module's doc)."""
    if row.level in ("g", "u") or row.dso.startswith("[guest"):
        return "guest"
    if row.level == "k":
        return "guest" if row.symbol in VM_ENTRY else "kernel"
    if row.level == ".":
        return "qemu_user"
    return UNATTRIBUTED


def sections(text: str) -> dict[str, tuple[str, str]]:
    """The script's sections: name to (the header's words, the body)."""
    found: dict[str, tuple[str, list[str]]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("=== note "):
            found.setdefault("note", ("", []))[1].append(line.removeprefix("=== note "))
            continue
        m = _SECTION.match(line)
        if m:
            current = []
            found[m[1]] = (m[2] or "", current)
            continue
        if current is not None:
            current.append(line)
    return {k: (head, "\n".join(body)) for k, (head, body) in found.items()}


def _proc(head: str, body: str) -> tuple[float, int | None, dict[int, ThreadTimes]] | None:
    """``UPTIME HZ PID`` and the threads' stat lines."""
    words = head.split()
    try:
        uptime, hz = float(words[0]), float(words[1])
    except (IndexError, ValueError):
        return None
    if not (math.isfinite(uptime) and math.isfinite(hz) and hz > 0):
        return None
    pid = int(words[2]) if len(words) > 2 and words[2].isdigit() else None
    return uptime, pid, parse_stats(body, hz)


def thread_role(tid: int | None, name: str, pid: int | None) -> str:
    """What a QEMU thread does: :func:`~kvmlab.runtime.thread_cpu.role`, except that only
    the process's first thread is its main loop (QEMU's RCU and helper threads keep the
    process's name)."""
    found = role(name)
    if found == "main loop" and pid is not None and tid is not None and tid != pid:
        return "other"
    return found


def build(
    text: str,
    address: str,
    where: str,
    accel: str,
    seconds: float,
    rate: int,
    command: str,
) -> HostProfile:
    """The profile from ``hostprof.sh run`` output (or a bare ``perf report`` text)."""
    parts = sections(text)
    report_text = parts["report"][1] if "report" in parts else text
    profile = HostProfile(address, where, accel, seconds, rate, command)
    profile.perf_version = parts.get("perf-version", ("", ""))[1].strip()
    profile.notes.extend(line for line in parts.get("note", ("", ""))[1].splitlines() if line)
    names: dict[int, str] = {}
    procs = [_proc(*parts[k]) for k in ("threads-start", "threads-end") if k in parts]
    uses = {}
    if len(procs) == 2 and procs[0] is not None and procs[1] is not None:
        (t0, profile.pid, before), (t1, _, after) = procs[0], procs[1]
        profile.proc_seconds = round(t1 - t0, 3)
        names = {tid: t.name for tid, t in {**before, **after}.items()}
        if t1 > t0:
            uses = {u.tid: u for u in thread_use(before, after, t1 - t0)}
    fill(profile, parse(report_text), names)
    seen = {t.tid for t in profile.threads}
    profile.threads += [  # threads that never ran in the window
        ThreadProfile(tid, name, thread_role(tid, name, profile.pid))
        for tid, name in names.items()
        if tid not in seen
    ]
    for t in profile.threads:
        use = uses.get(t.tid) if t.tid is not None else None
        if use is not None:
            t.proc = {
                "guest_pct": round(use.guest_pct, 1),
                "kernel_pct": round(use.kernel_pct, 1),
                "qemu_user_pct": round(use.qemu_user_pct, 1),
            }
    _annotate(profile)
    return profile


def fill(profile: HostProfile, report: Report, names: dict[int, str] | None = None) -> None:
    """Rows, threads and totals of ``profile`` from a parsed report; ``names``: each
    thread's name by id (a guest sample's thread is perf's ``:TID``)."""
    named = {
        r.tid: r.comm for r in report.rows if r.tid is not None and r.comm[:1] not in ("", ":")
    }
    names = {**named, **(names or {})}
    profile.event = report.event
    profile.lost = report.lost or 0
    shown = sum(r.self_pct for r in report.rows)
    if report.event_count is not None and report.event in ("cpu-clock", "task-clock"):
        total = report.event_count / 1e9
    else:  # one sample per 1/rate s of CPU
        count = report.samples or report.samples_approx or report.self_samples
        total = count / profile.rate if profile.rate else 0.0
    profile.sampled_seconds = total
    profile.samples = report.samples or report.self_samples or report.samples_approx or 0
    profile.unattributed = max(0.0, 100 - shown) / 100 * total if shown < 100 - NOISE_PCT else 0.0
    threads: dict[tuple[int | None, str], ThreadProfile] = {}
    for row in report.rows:
        name = _thread_name(row, names)
        what = thread_role(row.tid, name, profile.pid)
        if row.children_pct and row.level == "k":
            key = (row.tid, row.symbol)
            seconds = row.children_pct / 100 * total
            profile.inclusive[key] = max(profile.inclusive.get(key, 0.0), seconds)
        if not row.self_pct and not row.samples:
            continue
        cls = classify(row)
        seconds = row.self_pct / 100 * total
        sample = Sample(
            tid=row.tid,
            thread=name,
            role=what,
            dso=row.dso,
            symbol=row.symbol,
            level=row.level,
            cls=cls,
            samples=row.samples if row.samples is not None else round(seconds * profile.rate),
            seconds=seconds,
            share=row.self_pct / 100,
        )
        profile.rows.append(sample)
        thread = threads.setdefault((row.tid, name), ThreadProfile(row.tid, name, what))
        thread.samples += sample.samples
        thread.seconds += seconds
        if cls in thread.classes:
            thread.classes[cls] += seconds
    profile.rows.sort(key=lambda r: (-r.seconds, r.thread, r.symbol))
    profile.threads = sorted(threads.values(), key=lambda t: (-t.seconds, t.name))
    if report.skipped:
        profile.notes.append(f"{report.skipped} report line(s) looked like rows but did not parse")


def _thread_name(row: Row, names: dict[int, str]) -> str:
    if row.tid is not None and row.tid in names:
        return names[row.tid]
    comm = row.comm
    if not comm or comm.startswith(":"):  # perf's name for a thread it saw no comm of
        return f"thread {row.tid}" if row.tid is not None else "?"
    return comm


def _annotate(profile: HostProfile) -> None:
    """Notes on what the numbers can and cannot say."""
    if profile.partial is None and not profile.rows and not profile.unattributed:
        profile.notes.append(
            "no samples: QEMU did not run on a host CPU during the window (idle or paused)"
        )
    if profile.lost:
        profile.notes.append(f"perf lost {profile.lost} samples")
    if profile.unattributed:
        share = profile.unattributed / profile.sampled_seconds
        profile.notes.append(
            f"{share:.0%} of the sampled time is in no row of perf's report (samples it "
            "could not attribute): counted as unattributed"
        )
    if profile.accel == "tcg":
        profile.notes.append(
            "under TCG there is no guest mode: the vCPU threads' time is QEMU's user "
            "space running the guest's translated code ([unknown] rows)"
        )
    kvm = [t for t in profile.threads if t.kvm_vcpu]
    guest = sum(t.classes["guest"] for t in kvm)
    proc_guest = sum((t.proc or {}).get("guest_pct", 0.0) for t in kvm)
    if kvm and not guest and proc_guest >= 5:
        profile.notes.append(
            f"/proc counts the vCPU threads {proc_guest:.0f}% of a CPU in guest mode but "
            "perf reported no guest-mode sample: this kernel's perf attributes them "
            "elsewhere, so guest mode is undercounted here"
        )
