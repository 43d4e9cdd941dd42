"""The tracepoint provider: ``trace.sh`` output (tracefs hist triggers) to a :class:`Profile`.

``trace.sh`` runs where the guest's KVM runs and prints raw histograms; everything here is
parsing, so it is tested on output recorded inside a real guest hypervisor.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources

from kvmlab.errors import UsageError
from kvmlab.exits.cputime import ThreadTimes, cpu_window
from kvmlab.exits.model import MmioStat, MsrStat, PioStat, Profile, ReasonStat
from kvmlab.exits.names import exit_reason, mmio_name, msr_name, port_name
from kvmlab.exits.pcimap import Region

PROVIDER = "tracepoints"
NOTE = (
    "kernel tracepoints kvm_exit/kvm_entry/kvm_pio/kvm_msr/kvm_mmio, in-kernel hist "
    "triggers in a private tracefs instance, filtered to the guest's QEMU threads"
)
NO_HIST = 5
"""trace.sh's exit status when the kernel has no hist triggers (another provider is needed)."""
NO_TRACEFS = 4
ISA = {1: "vmx", 2: "svm"}
MMIO_READ, MMIO_WRITE = 1, 2
_ROW = re.compile(r"^\{(?P<keys>[^}]*)\}(?P<vals>.*)$")
_PAIR = re.compile(r"(\w+):\s*(~\s*2\^)?\s*(-?\d+)")
_DROPPED = re.compile(r"^\s*Dropped:\s*(\d+)\s*$")
NAME_PATTERN = re.compile(r"kvmlab_[A-Za-z0-9_]{1,48}")
"""A tracer run's name: its tracefs instance and synthetic event (``NAME_lat``), an
identifier kvmlab's own (trace.sh and perf.sh refuse any other, and so never touch
another tool's instance)."""
_PID = re.compile(r"[0-9]{1,10}|@/[^\x00-\x1f\x7f]{1,4000}")
MAX_SECONDS = 86400.0


def check_run_args(name: str, seconds: float, pid: str) -> None:
    """Refuse what must not reach the tracer's shell or tracefs: a name other than
    :data:`NAME_PATTERN`, a window that is not 0.01 s to a day, a pid that is not digits
    or ``@`` and an absolute pid file path."""
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(
            f"{name!r} is not a tracer run name (kvmlab_ then up to 48 letters, "
            "digits and underscores)"
        )
    if not (math.isfinite(seconds) and 0.01 <= seconds <= MAX_SECONDS):
        raise UsageError(f"a tracing window must be 0.01 to {MAX_SECONDS:g} s, not {seconds:g}")
    if not _PID.fullmatch(pid):
        raise UsageError(f"{pid!r} is not a process id or @/absolute/pid/file")


def script() -> str:
    """The tracer script's text (run with ``sh -c SCRIPT trace.sh ...``)."""
    return resources.files("kvmlab.exits").joinpath("trace.sh").read_text()


def run_argv(name: str, seconds: float, pid: str) -> list[str]:
    """The command that profiles QEMU process ``pid`` (``@FILE``: the pid in FILE) for
    ``seconds`` (tracefs instance ``name``)."""
    check_run_args(name, seconds, pid)
    return ["sh", "-c", script(), "trace.sh", "run", name, f"{seconds:g}", pid]


def clean_argv(name: str) -> list[str]:
    """The command that removes what an interrupted run ``name`` left in tracefs."""
    check_run_args(name, 1.0, "0")
    return ["sh", "-c", script(), "trace.sh", "clean", name]


@dataclass
class Hist:
    """One histogram: rows of key and value fields, and the entries the kernel dropped."""

    rows: list[tuple[dict[str, int], dict[str, int]]] = field(default_factory=list)
    dropped: int = 0
    log2: set[str] = field(default_factory=set)


def parse_hists(text: str) -> list[Hist]:
    """Every histogram in ``text`` (the ``hist`` file of an event; several triggers each)."""
    hists: list[Hist] = []
    for line in text.splitlines():
        if line.startswith("# event histogram"):
            hists.append(Hist())
            continue
        if not hists:
            continue
        row = _ROW.match(line.strip())
        if row:
            keys, log2 = _pairs(row["keys"])
            vals, _ = _pairs(row["vals"])
            hists[-1].rows.append((keys, vals))
            hists[-1].log2 |= log2
        elif dropped := _DROPPED.match(line):
            hists[-1].dropped = int(dropped[1])
    return hists


def _pairs(text: str) -> tuple[dict[str, int], set[str]]:
    out: dict[str, int] = {}
    log2: set[str] = set()
    for key, tilde, value in _PAIR.findall(text):
        out[key] = int(value)
        if tilde:
            log2.add(key)
    return out, log2


def sections(output: str) -> Iterator[tuple[str, str]]:
    """``(header, body)`` for each ``=== header`` section of trace.sh's output."""
    header, body = "", list[str]()
    for line in output.splitlines():
        if line.startswith("=== "):
            if header:
                yield header, "\n".join(body)
            header, body = line[4:], []
        else:
            body.append(line)
    if header:
        yield header, "\n".join(body)


def parse_output(
    output: str, address: str, seconds: float, regions: Sequence[Region] = ()
) -> Profile:
    """The profile in trace.sh's output (a run that was cut short gives a partial one)."""
    profile = Profile(address=address, provider=PROVIDER, provider_note=NOTE, seconds=seconds)
    cpu: dict[str, ThreadTimes] = {}
    hists: dict[str, list[Hist]] = {}
    for header, body in sections(output):
        word, _, rest = header.partition(" ")
        if word in ("cpu-start", "cpu-end"):
            try:
                cpu[word] = ThreadTimes.parse(rest, body)
            except ValueError:  # a garbled snapshot: no CPU window, the exits still count
                continue
        elif word == "hist":
            hists["lat" if rest.endswith("_lat") else rest] = parse_hists(body)
    if "cpu-start" in cpu and "cpu-end" in cpu:
        profile.cpu = cpu_window(cpu["cpu-start"], cpu["cpu-end"])
        profile.seconds = profile.cpu.seconds
    if "kvm_exit" not in hists:
        profile.partial = "the tracer stopped before its window ended"
        return profile
    _exits(profile, hists["kvm_exit"], hists.get("lat", []))
    _drilldowns(profile, hists, regions)
    profile.dropped = sum(h.dropped for group in hists.values() for h in group)
    if profile.dropped:
        profile.notes.append(f"{profile.dropped} histogram entries dropped (map full)")
    return profile


def _exits(profile: Profile, exit_hists: list[Hist], lat_hists: list[Hist]) -> None:
    counts: dict[int, int] = defaultdict(int)
    vendor = ""
    for keys, vals in exit_hists[0].rows if exit_hists else []:
        if not _has(keys, "exit_reason", "vcpu_id") or "hitcount" not in vals:
            continue
        vendor = ISA.get(keys.get("isa", 0), vendor)
        counts[keys["exit_reason"]] += vals["hitcount"]
        vcpu = keys["vcpu_id"]
        profile.vcpus[vcpu] = profile.vcpus.get(vcpu, 0) + vals["hitcount"]
    profile.vendor = vendor
    total_ns: dict[int, int] = {}
    buckets: dict[int, list[int]] = defaultdict(list)
    for hist in lat_hists:
        for keys, vals in hist.rows:
            if "reason" not in keys:
                continue
            if "lat" in hist.log2 and "lat" in keys:
                buckets[keys["reason"]].append(keys["lat"])
            elif "lat" in vals:
                total_ns[keys["reason"]] = vals["lat"]
    for code, count in counts.items():
        name, kind = exit_reason(vendor or "svm", code)
        stat = ReasonStat(reason=name, kind=kind, count=count, time_ns=total_ns.get(code))
        if buckets.get(code):
            # a log2 bucket k holds values in (2^(k-1), 2^k]
            stat.min_ns = 2 ** (min(buckets[code]) - 1)
            stat.max_ns = 2 ** max(buckets[code])
        profile.reasons.append(stat)
    if buckets:
        profile.notes.append("min/max handling times are log2 bucket bounds")


def _drilldowns(profile: Profile, hists: dict[str, list[Hist]], regions: Sequence[Region]) -> None:
    pio: dict[tuple[int, bool], PioStat] = {}
    for keys, vals in _rows(hists, "kvm_pio", "port", "rw"):
        key = (keys["port"], bool(keys["rw"]))
        if key in pio:
            pio[key].count += vals["hitcount"]
        else:
            pio[key] = PioStat(
                port=key[0],
                write=key[1],
                count=vals["hitcount"],
                size=keys.get("size"),
                name=port_name(key[0]),
            )
    profile.pio = sorted(pio.values(), key=lambda s: -s.count)
    msr = _rows(hists, "kvm_msr", "ecx", "write")
    profile.msr = sorted(
        (
            MsrStat(
                index=k["ecx"], write=bool(k["write"]), count=v["hitcount"], name=msr_name(k["ecx"])
            )
            for k, v in msr
        ),
        key=lambda s: -s.count,
    )
    mmio = _rows(hists, "kvm_mmio", "gpa", "type")
    profile.mmio = sorted(
        (
            MmioStat(
                gpa=k["gpa"],
                write=k["type"] == MMIO_WRITE,
                count=v["hitcount"],
                name=mmio_name(k["gpa"], regions),
            )
            for k, v in mmio
            if k["type"] in (MMIO_READ, MMIO_WRITE)
        ),
        key=lambda s: -s.count,
    )


def _rows(
    hists: dict[str, list[Hist]], event: str, *keys: str
) -> list[tuple[dict[str, int], dict[str, int]]]:
    """The rows of ``event``'s first histogram that have ``keys`` and a hitcount (a row
    cut short, when the output was, is left out)."""
    group = hists.get(event, [])
    rows = group[0].rows if group else []
    return [(k, v) for k, v in rows if _has(k, *keys) and "hitcount" in v]


def _has(fields: dict[str, int], *names: str) -> bool:
    return all(n in fields for n in names)
