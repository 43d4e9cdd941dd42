"""Rules that read a host-side profile of a guest's QEMU (``host_rules.toml``), run.

The file names symbol groups and rules, in :mod:`kvmlab.exits.rulespec`'s models (its
``samples``, ``cpu = "guest"`` and ``top`` conditions); a rule fires when all its ``when``
conditions hold on a :class:`~kvmlab.exits.hostprof.HostProfile`: a selection of samples
(threads, class, group) as CPU or as a share of another selection, or the guest's own CPU
use. A condition on data the profile lacks (the guest's CPU when its agent did not answer)
leaves the rule *unchecked*, with what it needs. The file's format is described at its top.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kvmlab.exits.hostprof import CLASSES, HostProfile, Sample, ThreadProfile, thread_role
from kvmlab.exits.rulespec import (
    Condition,
    CpuCond,
    Example,
    Group,
    Rule,
    RuleSet,
    SamplesCond,
    Select,
    TopCond,
    parse_rule_set,
)

RULES_FILE = Path(__file__).with_name("host_rules.toml")
SEVERITIES = ("high", "medium", "low")


def parse_rules(text: str, shown: str) -> RuleSet:
    """The rules of a host-profile rules file's text; a bad file is a SpecError naming where."""
    return parse_rule_set(text, shown, host=True)


@cache
def load_rules(path: Path = RULES_FILE) -> RuleSet:
    """The shipped rules (or ``path``'s)."""
    return parse_rules(path.read_text(encoding="utf-8"), str(path))


def _measured(cond: Condition) -> SamplesCond | CpuCond:
    """``cond`` as a host-profile condition that measures (the rules file is checked:
    :func:`parse_rules` lets no other kind through)."""
    assert isinstance(cond, SamplesCond | CpuCond), cond
    return cond


# Measuring ----------------------------------------------------------------------------------


def _thread_selected(thread: str, role: str, threads: str) -> bool:
    if threads == "all":
        return True
    if threads == "kvm_vcpu":
        return role == "vCPU" and thread.endswith("/KVM")
    if threads == "vcpu":
        return role == "vCPU"
    if threads == "not_vcpu":
        return role != "vCPU"
    return role == {"main": "main loop", "io": "I/O thread"}[threads]


def _matches(symbol: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(symbol, p) for p in patterns)


def selected(
    profile: HostProfile, sel: Select, groups: dict[str, Group], leaves: bool = False
) -> list[Sample]:
    """The rows a selection takes: leaf samples, without the kernel ones its group counts
    through call chains (``leaves``: with them, matched by the group's symbols, to show)."""
    group = groups[sel.group] if sel.group else None
    use_under = not leaves and group is not None and bool(group.under) and profile.has_callchains
    rows = []
    for r in profile.rows:
        if not _thread_selected(r.thread, r.role, sel.threads):
            continue
        if sel.cls != "any" and r.cls != sel.cls:
            continue
        if group is not None:
            if use_under and r.cls == "kernel":
                continue  # counted from the call chains
            if not _matches(r.symbol, group.symbols):
                continue
        rows.append(r)
    return rows


def seconds_of(profile: HostProfile, sel: Select, groups: dict[str, Group]) -> float:
    """CPU seconds of a selection: its leaf rows, and with call chains the kernel time
    under its group's ``under`` functions (per thread the largest: they nest)."""
    total = sum(r.seconds for r in selected(profile, sel, groups))
    group = groups[sel.group] if sel.group else None
    if group is None or not group.under or not profile.has_callchains:
        return total
    if sel.cls not in ("any", "kernel"):
        return total
    for t in profile.threads:
        if not _thread_selected(t.name, t.role, sel.threads):
            continue
        under = [
            s for (tid, fn), s in profile.inclusive.items() if tid == t.tid and fn in group.under
        ]
        total += max(under, default=0.0)
    return total


@dataclass(frozen=True)
class Measured:
    """What a condition measured: CPU (% of one host CPU; the guest's own for ``cpu =
    "guest"``), the share of its ``of`` selection (0-1, None without one), and the line to
    quote."""

    cpu: float
    share: float | None
    line: str

    @property
    def weight(self) -> float:
        """How much it weighs among findings, 0-1: the share, else the CPU."""
        return self.share if self.share is not None else min(1.0, self.cpu / 100)


def measure(cond: Condition, profile: HostProfile, groups: dict[str, Group]) -> Measured | str:
    """What ``cond`` measures in ``profile``, or what it needs that the profile lacks."""
    cond = _measured(cond)
    if isinstance(cond, CpuCond):
        if profile.guest_cpu is None:
            return "the guest's own CPU use (its agent: /proc/stat before and after)"
        guest = profile.guest_cpu
        return Measured(guest, None, f"CPU use inside the guest: {guest:.0f}%")
    part = seconds_of(profile, cond.samples, groups)
    cpu = profile.cpu_percent(part)
    if cond.of is None:
        return Measured(cpu, None, f"{cond.samples.words(groups)}: {cpu:.0f}% of a host CPU")
    whole = seconds_of(profile, cond.of, groups)
    share = part / whole if whole else 0.0
    return Measured(
        cpu,
        share,
        f"{cond.samples.words(groups)}: {share:.0%} of {cond.of.words(groups)} "
        f"({cpu:.0f}% of a host CPU)",
    )


def _within(value: float | None, low: float | None, high: float | None) -> bool:
    if low is None and high is None:
        return True
    if value is None:
        return False
    return (low is None or value >= low) and (high is None or value <= high)


def holds(cond: Condition, got: Measured) -> bool:
    """Whether every threshold of ``cond`` holds for what it measured."""
    cond = _measured(cond)
    if isinstance(cond, CpuCond):
        return _within(got.cpu, cond.min, cond.max)
    return _within(got.cpu, cond.min_cpu, cond.max_cpu) and _within(
        got.share, cond.min_share, cond.max_share
    )


def limits(cond: Condition) -> str:
    """The thresholds in words, to quote beside the value."""
    cond = _measured(cond)
    if isinstance(cond, CpuCond):
        pairs = [(">=", cond.min, "%"), ("<=", cond.max, "%")]
    else:
        pairs = [
            (">=", None if cond.min_share is None else cond.min_share * 100, "%"),
            ("<=", None if cond.max_share is None else cond.max_share * 100, "%"),
            (">=", cond.min_cpu, "% of a CPU"),
            ("<=", cond.max_cpu, "% of a CPU"),
        ]
    words = [f"{op} {v:g}{unit}" for op, v, unit in pairs if v is not None]
    return f" [rule: {', '.join(words)}]"


def _top(cond: TopCond, profile: HostProfile, groups: dict[str, Group]) -> list[str]:
    rows = selected(profile, cond.samples or Select(), groups, leaves=True)[: cond.top]
    total = profile.sampled_seconds
    return [
        f"{r.symbol} in {r.dso} ({r.thread}): {r.seconds / total:.1%} of QEMU's samples"
        for r in rows
        if total
    ]


# Evaluation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostFinding:
    """A rule that fired: its numbers and what to look at."""

    rule: Rule
    evidence: tuple[str, ...]
    look: tuple[str, ...]
    host: tuple[str, ...]
    weight: float

    def to_json(self) -> dict[str, Any]:
        """The finding for ``-o json``."""
        return {
            "rule": self.rule.id,
            "title": self.rule.title,
            "severity": self.rule.severity,
            "cause": " ".join(self.rule.cause.split()),
            "source": list(self.rule.source),
            "evidence": list(self.evidence),
            "fix": {"look": list(self.look), "host": list(self.host)},
            "weight": round(self.weight, 4),
        }


@dataclass(frozen=True)
class HostDiagnosis:
    """Findings, most severe and weighty first; rules the profile had no data for."""

    findings: list[HostFinding]
    unchecked: list[str]


def evaluate(
    profile: HostProfile, rules: RuleSet | None = None, address: str | None = None
) -> HostDiagnosis:
    """The rules (the shipped ones unless given) on ``profile``."""
    rules = rules or load_rules()
    findings, unchecked = [], []
    for rule in rules.rule:
        lines, needs, ok, weight = [], [], True, 0.0
        for cond in rule.when:
            got = measure(cond, profile, rules.group)
            if isinstance(got, str):
                needs.append(got)
                continue
            ok = ok and holds(cond, got)
            lines.append(got.line + limits(cond))
            if isinstance(cond, SamplesCond):
                weight = max(weight, got.weight)
        if not ok:
            continue
        if needs:
            unchecked.append(f"not checked: {rule.id} ({rule.title}): needs {'; '.join(needs)}")
            continue
        for ev in rule.evidence:
            if isinstance(ev, TopCond):
                lines.extend(_top(ev, profile, rules.group))
                continue
            got = measure(ev, profile, rules.group)
            if isinstance(got, Measured) and not any(x.startswith(got.line) for x in lines):
                lines.append(got.line)
        where = address or profile.address
        findings.append(
            HostFinding(
                rule,
                tuple(lines),
                tuple(step.replace("{address}", where) for step in rule.fix.look),
                tuple(rule.fix.host),
                min(1.0, weight),
            )
        )
    findings.sort(key=lambda f: (SEVERITIES.index(f.rule.severity), -f.weight, f.rule.id))
    return HostDiagnosis(findings, unchecked)


def example_profile(example: Example, rate: int = 199) -> HostProfile:
    """The profile a rule's example describes (thread ids in order of appearance, the
    first the main thread; ``g`` rows are guest samples)."""
    profile = HostProfile(
        address="example/guest",
        where="this host",
        accel="kvm",
        seconds=example.seconds,
        rate=rate,
        command="example",
        pid=1000,
    )
    tids: dict[str, int] = {}
    for name in [r[0] for r in example.rows] + [u[0] for u in example.under]:
        tids.setdefault(name, 1000 + len(tids))
    total = sum(r[3] for r in example.rows)
    profile.sampled_seconds = total
    threads: dict[str, ThreadProfile] = {}
    for name, level, symbol, seconds in example.rows:
        what = thread_role(tids[name], name, profile.pid)
        cls = "guest" if level in ("g", "u") else "kernel" if level == "k" else "qemu_user"
        samples = round(seconds * rate)
        profile.rows.append(
            Sample(
                tids[name],
                name,
                what,
                "[kernel.kallsyms]" if level == "k" else "qemu-system-x86_64",
                symbol,
                level,
                cls,
                samples,
                seconds,
                seconds / total if total else 0.0,
            )
        )
        thread = threads.setdefault(name, ThreadProfile(tids[name], name, what))
        thread.samples += samples
        thread.seconds += seconds
        thread.classes[cls] += seconds
    for name, function, seconds in example.under:
        profile.inclusive[(tids[name], function)] = seconds
    profile.rows.sort(key=lambda r: (-r.seconds, r.thread, r.symbol))
    profile.threads = sorted(threads.values(), key=lambda t: -t.seconds)
    profile.samples = sum(r.samples for r in profile.rows)
    profile.guest_cpu = example.cpu.get("guest")
    assert set(CLASSES) >= {r.cls for r in profile.rows}
    return profile
