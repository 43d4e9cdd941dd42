"""Diagnosis rules: loading ``rules.toml`` and running its rules against a Profile.

A rule fires when every ``when`` condition holds. A condition reads the profile (exit kinds,
ports, MSRs, guest-physical ranges, KVM counters, CPU use) or the guest's lab settings (the
*context*: :func:`kvmlab.exits.fixes.guest_context`, or any mapping of dotted keys). A
condition on data the profile lacks (a counters-only profile has no ports) leaves its rule
*unchecked*, with what it needs; a lab condition without a context is assumed, and said so,
unless it has ``unknown = "skip"``. The file's tables and their loading are
:mod:`kvmlab.exits.rulespec`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvmlab.exits import names
from kvmlab.exits.fixes import FixPlan, lookup, plan_fix
from kvmlab.exits.model import Profile
from kvmlab.exits.rulespec import (
    RULES_FILE,
    AllCond,
    AnyCond,
    Condition,
    CounterCond,
    CpuCond,
    GpaCond,
    KindCond,
    LabCond,
    Measure,
    MsrCond,
    PortCond,
    Rule,
    SamplesCond,
    Selector,
    TopCond,
    load_rules,
    parse_rules,
)

__all__ = [
    "RULES_FILE",
    "Diagnosis",
    "Finding",
    "Measurement",
    "Rule",
    "Unchecked",
    "VerifyCheck",
    "diagnose",
    "evaluate",
    "load_rules",
    "measure",
    "parse_rules",
    "verify_fix",
]

KIND_COUNTERS = {
    "io": "io_exits",
    "mmio": "mmio_exits",
    "hlt": "halt_exits",
    "external_interrupt": "irq_exits",
    "interrupt_window": "irq_window_exits",
    "nmi_window": "nmi_window_exits",
    "hypercall": "hypercalls",
}
"""Counters a kind falls back to in a counters-only profile (io/mmio: exits to QEMU only)."""

SEVERITIES = ("high", "medium", "low")
VERIFY_DROP = 0.5
"""A verified fix cuts what ``verify`` names by at least this fraction."""


# Evaluation ---------------------------------------------------------------------------------

NEEDS = {
    "reasons": "exit reasons (tracepoints, perf kvm stat or QMP query-stats)",
    "pio": "exits per I/O port (tracepoints: kvm:kvm_pio)",
    "msr": "exits per MSR (tracepoints: kvm:kvm_msr)",
    "mmio": "exits per guest-physical address (tracepoints: kvm:kvm_mmio, kvm:kvm_page_fault)",
    "cpu": "host and guest CPU use over the window",
    "guest_cpu": "the guest's own CPU use (the guest agent)",
    "vcpus": "the guest's vCPU count (the lab file)",
}


@dataclass(frozen=True)
class Measurement:
    """What a condition measured: ``value`` in ``unit`` (``/s``, ``ns/s``, ``%`` or
    `` points``; per vCPU when asked), the share of all exits where that applies, and the
    lines to quote."""

    value: float
    unit: str
    share: float | None
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Finding:
    """A rule that fired: its numbers, what was assumed, the fix and what should drop."""

    rule: Rule
    title: str
    evidence: tuple[str, ...]
    assumed: tuple[str, ...]
    """Lab conditions taken as true because no lab was given."""
    fix: FixPlan
    verify: tuple[str, ...]
    weight: float
    """Largest share of exits (or of a CPU) behind it; orders findings of one severity."""

    @property
    def id(self) -> str:
        """The rule's id."""
        return self.rule.id

    @property
    def severity(self) -> str:
        """high, medium or low."""
        return self.rule.severity

    @property
    def cause(self) -> str:
        """The rule's cause as one line of text (the file wraps it)."""
        return " ".join(self.rule.cause.split())

    def to_json(self) -> dict[str, Any]:
        """The finding for ``-o json``."""
        return {
            "rule": self.id,
            "title": self.title,
            "severity": self.severity,
            "cause": self.cause,
            "source": self.rule.source,
            "evidence": list(self.evidence),
            "assumed": list(self.assumed),
            "fix": {
                "lab": self.fix.lab,
                "host": list(self.fix.host),
                "guest": list(self.fix.guest),
            },
            "verify": list(self.verify),
            "weight": self.weight,
        }


@dataclass(frozen=True)
class Unchecked:
    """A rule the profile has too little data for."""

    rule: str
    title: str
    needs: tuple[str, ...]

    def __str__(self) -> str:
        return f"not checked: {self.rule} ({self.title}): needs {'; '.join(self.needs)}"


@dataclass(frozen=True)
class Diagnosis:
    """Findings, most severe and weighty first, and the rules that could not be checked."""

    findings: list[Finding]
    unchecked: list[Unchecked]


@dataclass(frozen=True)
class VerifyCheck:
    """One number ``verify`` names, before and after a fix."""

    what: str
    before: float | None
    after: float | None
    unit: str

    @property
    def dropped(self) -> bool | None:
        """Whether it fell by :data:`VERIFY_DROP` at least; None if either is unmeasured."""
        if self.before is None or self.after is None:
            return None
        return self.after <= self.before * (1 - VERIFY_DROP)


def diagnose(
    profile: Profile,
    context: Mapping[str, object] | None = None,
    rules: Sequence[Rule] | None = None,
) -> list[Finding]:
    """The rules that fire on ``profile``, most severe and weighty first."""
    return evaluate(profile, context, rules).findings


def evaluate(
    profile: Profile,
    context: Mapping[str, object] | None = None,
    rules: Sequence[Rule] | None = None,
) -> Diagnosis:
    """Findings and unchecked rules (the shipped rules unless ``rules`` is given)."""
    findings: list[Finding] = []
    unchecked: list[Unchecked] = []
    for rule in load_rules() if rules is None else rules:
        result = _all([_eval(c, profile, context) for c in rule.when])
        if result.ok is None:
            needs = tuple(dict.fromkeys(result.needs))
            unchecked.append(Unchecked(rule.id, rule.title_for(profile), needs))
        elif result.ok:
            findings.append(_finding(rule, result, profile, context))
    findings.sort(key=lambda f: (SEVERITIES.index(f.severity), -f.weight, f.id))
    return Diagnosis(findings, unchecked)


def verify_fix(
    rule: Rule, before: Profile, after: Profile, context: Mapping[str, object] | None = None
) -> list[VerifyCheck]:
    """What ``rule.verify`` names, measured before and after the fix."""
    checks = []
    for sel in rule.verify:
        if isinstance(sel, Measure):
            old, new = measure(sel, before, context), measure(sel, after, context)
            got = [m for m in (old, new) if isinstance(m, Measurement)]
            checks.append(
                VerifyCheck(
                    _label(sel),
                    old.value if isinstance(old, Measurement) else None,
                    new.value if isinstance(new, Measurement) else None,
                    got[0].unit if got else "",
                )
            )
    return checks


@dataclass(frozen=True)
class _Eval:
    ok: bool | None
    lines: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    weight: float = 0.0


def _all(results: list[_Eval]) -> _Eval:
    if any(r.ok is False for r in results):
        return _Eval(False)
    if any(r.ok is None for r in results):
        return _Eval(None, needs=tuple(n for r in results for n in r.needs))
    return _Eval(
        True,
        tuple(x for r in results for x in r.lines),
        tuple(x for r in results for x in r.assumed),
        weight=max((r.weight for r in results), default=0.0),
    )


def _eval(cond: Condition, profile: Profile, context: Mapping[str, object] | None) -> _Eval:
    if isinstance(cond, LabCond):
        return _eval_lab(cond, context)
    if isinstance(cond, AllCond):
        return _all([_eval(c, profile, context) for c in cond.all])
    if isinstance(cond, AnyCond):
        results = [_eval(c, profile, context) for c in cond.any]
        held = [r for r in results if r.ok and not r.assumed] or [r for r in results if r.ok]
        if held:
            return _all(held)
        if any(r.ok is None for r in results):
            return _Eval(None, needs=tuple(n for r in results for n in r.needs))
        return _Eval(False)
    if isinstance(cond, TopCond):
        return _Eval(True, _top(cond, profile))
    assert not isinstance(cond, SamplesCond), "a host profile's (parse_rules refuses it here)"
    m = measure(cond, profile, context)
    if not isinstance(m, Measurement):
        return _Eval(None, needs=m)
    return _Eval(_meets(cond, m), m.lines, weight=_weight(m))


def _meets(cond: Measure, m: Measurement) -> bool:
    if isinstance(cond, CpuCond):
        low, high = cond.min, cond.max
        return (low is None or m.value >= low) and (high is None or m.value <= high)
    return (cond.min_rate is None or m.value >= cond.min_rate) and (
        cond.min_share is None or (m.share or 0.0) >= cond.min_share
    )


def _weight(m: Measurement) -> float:
    if m.share is not None:
        return m.share
    scale = {"ns/s": 1e9, "%": 100.0, " points": 100.0}.get(m.unit, float("inf"))
    return max(0.0, min(1.0, m.value / scale))


def _eval_lab(cond: LabCond, context: Mapping[str, object] | None) -> _Eval:
    if context is None:
        if cond.unknown == "skip":
            return _Eval(None, needs=(f"the lab file ({cond.lab})",))
        return _Eval(True, assumed=(f"{cond.lab} {_lab_test(cond)}",))
    value = lookup(context, cond.lab)
    return _Eval(_lab_holds(cond, value), (f"lab: {cond.lab} = {_show(value)}",))


def _same(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _lab_holds(c: LabCond, value: object) -> bool:
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    items = value if isinstance(value, list | tuple) else []
    tests = [
        c.unset is None or (value is None) == c.unset,
        c.empty is None or (value is None or value in ("", [], (), {})) == c.empty,
        c.in_ is None or any(_same(value, v) for v in c.in_),
        c.not_in is None or not any(_same(value, v) for v in c.not_in),
        c.min is None or (number is not None and number >= c.min),
        c.max is None or (number is not None and number <= c.max),
        c.lacks_any is None or any(x not in items for x in c.lacks_any),
    ]
    return all(tests)


def _lab_test(c: LabCond) -> str:
    words = []
    if c.unset is not None:
        words.append("is unset" if c.unset else "is set")
    if c.empty is not None:
        words.append("is empty" if c.empty else "is not empty")
    if c.in_ is not None:
        words.append(f"is one of {', '.join(map(_show, c.in_))}")
    if c.not_in is not None:
        words.append(f"is not {' or '.join(map(_show, c.not_in))}")
    if c.min is not None:
        words.append(f">= {c.min:g}")
    if c.max is not None:
        words.append(f"<= {c.max:g}")
    if c.lacks_any is not None:
        words.append(f"lacks one of {', '.join(c.lacks_any)}")
    return " and ".join(words)


def _show(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(_show, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_show(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def _finding(
    rule: Rule, result: _Eval, profile: Profile, context: Mapping[str, object] | None
) -> Finding:
    lines = list(result.lines)
    for sel in rule.evidence:  # numbers a condition already quoted are not repeated
        extra = _eval(sel, profile, context).lines
        lines.extend(x for x in extra if not any(y.startswith(x) for y in lines))
    verify = []
    for sel in rule.verify:
        if not isinstance(sel, Measure):
            continue  # the rule's validator allows measures only
        m = measure(sel, profile, context)
        now = f"now {_quantity(m.value, m.unit)}" if isinstance(m, Measurement) else "not measured"
        verify.append(f"{_label(sel)}: {now}; should drop after the fix")
    fix = plan_fix(rule.fix.lab, rule.fix.add, rule.fix.host, rule.fix.guest, context)
    return Finding(
        rule,
        rule.title_for(profile),
        tuple(lines),
        result.assumed,
        fix,
        tuple(verify),
        result.weight,
    )


# Measuring ----------------------------------------------------------------------------------

_OF: dict[type, str] = {PortCond: "ports", MsrCond: "msrs", GpaCond: "mmio"}
_BREAKDOWN_KINDS = {
    "ports": ("io",),
    "msrs": ("msr_read", "msr_write", "msr"),
    "mmio": ("npf", "mmio"),
}


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.3g}"


def _quantity(value: float, unit: str) -> str:
    """``1984/s``, ``412 ms/s``, ``131%``, ``127 points``."""
    if unit == "ns/s":
        return f"{_fmt(value / 1e6)} ms/s"
    return f"{value:.0f}{unit}" if unit in ("%", " points") else f"{_fmt(value)}{unit}"


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%" if share >= 0.1 else f"{share * 100:.2g}%"


def _dir(access: str, write: bool) -> bool:
    return access == "any" or (access == "write") == write


def _hexes(values: Sequence[int], sep: str = ", ") -> str:
    return sep.join(f"0x{v:x}" for v in values)


def _label(cond: Selector) -> str:
    """What a selector counts, in words (``reads of ports 0x70, 0x71``)."""
    access = {"any": "exits at", "read": "reads of", "write": "writes to"}
    if isinstance(cond, KindCond):
        return "all exits" if cond.kind == "all" else f"{cond.kind} exits"
    if isinstance(cond, PortCond):
        return f"{access[cond.access]} port{'s' * (len(cond.ports) > 1)} {_hexes(cond.ports)}"
    if isinstance(cond, MsrCond):
        return f"{access[cond.access]} MSR{'s' * (len(cond.msrs) > 1)} {_hexes(cond.msrs)}"
    if isinstance(cond, GpaCond):
        return f"{access[cond.access]} guest-physical {_hexes(cond.gpa, '-')}"
    if isinstance(cond, CounterCond):
        return f"counter {cond.counter}"
    if isinstance(cond, CpuCond):
        return {
            "host": "host CPU of the QEMU process",
            "guest": "CPU use inside the guest",
            "gap": "host CPU the guest does not see as its own",
        }[cond.cpu]
    return f"top {cond.of}"


def _limits(cond: Measure) -> str:
    per = " per vCPU" if cond.per_vcpu else ""
    parts = []
    if isinstance(cond, CpuCond):
        if cond.min is not None:
            parts.append(f">= {cond.min:g}{per}")
        if cond.max is not None:
            parts.append(f"<= {cond.max:g}{per}")
    else:
        unit = "ns/s" if isinstance(cond, CounterCond) and cond.counter.endswith("_ns") else "/s"
        if cond.min_rate is not None:
            parts.append(f">= {cond.min_rate:g}{unit}{per}")
        if cond.min_share is not None:
            parts.append(f">= {_pct(cond.min_share)} of exits")
    return f" [rule: {', '.join(parts)}]" if parts else ""


def _per_vcpu(
    cond: Measure, profile: Profile, context: Mapping[str, object] | None
) -> tuple[int, str] | None:
    """The divisor for per-vCPU values and its words; None when the count is unknown."""
    if not cond.per_vcpu:
        return 1, ""
    n = lookup(context, "vcpus") if context is not None else None
    if not (isinstance(n, int) and not isinstance(n, bool) and n > 0):
        n = len(profile.vcpus) or None
    return None if n is None else (n, f" per vCPU ({n} vCPU{'s' * (n > 1)})")


def _name(what: str, key: int, given: str) -> str:
    namer = {"port": names.port_name, "MSR": names.msr_name, "MMIO": names.mmio_name}[what]
    name = given or namer(key)
    return f" ({name})" if name else ""


def _rows(of: str, profile: Profile, cond: Selector) -> list[tuple[str, int]] | None:
    """The per-port, per-MSR or per-address rows ``cond`` matches, as ``(label, count)``,
    most first; None when the profile has no such breakdown (no exits of those kinds at all
    is a known empty one)."""
    stats = {
        "ports": [("port", s.port, s.write, s.count, s.name) for s in profile.pio],
        "msrs": [("MSR", s.index, s.write, s.count, s.name) for s in profile.msr],
        "mmio": [("MMIO", s.gpa, s.write, s.count, s.name) for s in profile.mmio],
    }[of]
    if not stats and not (
        profile.reasons and not sum(map(profile.kind_count, _BREAKDOWN_KINDS[of]))
    ):
        return None
    rows = []
    for what, key, write, count, given in sorted(stats, key=lambda s: (-s[3], s[1], s[2])):
        if isinstance(cond, PortCond | MsrCond | GpaCond):
            inside = (
                cond.gpa[0] <= key <= cond.gpa[1]
                if isinstance(cond, GpaCond)
                else key in (cond.ports if isinstance(cond, PortCond) else cond.msrs)
            )
            if not (inside and _dir(cond.access, write)):
                continue
        rows.append(
            (f"{what} 0x{key:x}{_name(what, key, given)} {'writes' if write else 'reads'}", count)
        )
    return rows


def _top(cond: TopCond, profile: Profile) -> tuple[str, ...]:
    total = profile.total

    def line(label: str, count: int) -> str:
        share = f", {_pct(count / total)} of exits" if total else ""
        return f"{label}: {_fmt(profile.rate(count))}/s{share}"

    if cond.of != "reasons":
        pairs = _rows(cond.of, profile, cond) or []
    elif profile.reasons:
        pairs = [(f"{r.reason} ({r.kind})", r.count) for r in profile.sorted_reasons()]
    else:
        exits = {k: v for k, v in profile.counters.items() if k.endswith("_exits")}
        pairs = [(f"counter {k}", v) for k, v in sorted(exits.items(), key=lambda kv: -kv[1])]
    return tuple(line(label, count) for label, count in pairs[: cond.top])


def measure(
    cond: Measure, profile: Profile, context: Mapping[str, object] | None = None
) -> Measurement | tuple[str, ...]:
    """What ``cond`` counts in ``profile``, or what data it needs that the profile lacks."""
    if isinstance(cond, CpuCond):
        return _measure_cpu(cond, profile, context)
    head: list[str] = []
    label = _label(cond)
    if isinstance(cond, KindCond):
        found = _kind_count(cond.kind, profile)
        if isinstance(found, str):
            return (found,)
        count, label = found[0], label + found[1]
    elif isinstance(cond, CounterCond):
        if cond.counter not in profile.counters:
            return (f"the KVM counter {cond.counter} (QMP query-stats)",)
        count = profile.counters[cond.counter]
    else:
        rows = _rows(_OF[type(cond)], profile, cond)
        if rows is None:
            return (NEEDS[{"ports": "pio", "msrs": "msr", "mmio": "mmio"}[_OF[type(cond)]]],)
        count = sum(c for _, c in rows)
        if len(rows) == 1:
            label = rows[0][0]
        elif rows:
            head = [f"{row}: {_fmt(profile.rate(c))}/s" for row, c in rows[:6]]
            label += " in all"
    divisor = _per_vcpu(cond, profile, context)
    if divisor is None:
        return (NEEDS["vcpus"],)
    value = profile.rate(count) / divisor[0]
    ns = isinstance(cond, CounterCond) and cond.counter.endswith("_ns")
    unit = "ns/s" if ns else "/s"
    text = f"{label}: {_quantity(value, unit)}{divisor[1]}"
    share = None
    if isinstance(cond, PortCond | MsrCond | GpaCond) or (
        isinstance(cond, KindCond) and cond.kind != "all"
    ):
        share = count / profile.total if profile.total else 0.0
        text += f", {_pct(share)} of exits"
    return Measurement(value, unit, share, (*head, text + _limits(cond)))


def _kind_count(kind: str, profile: Profile) -> tuple[int, str] | str:
    """Exits of ``kind`` and words on where they come from, or what data is missing."""
    if kind == "all":
        if not profile.reasons and "exits" not in profile.counters:
            return NEEDS["reasons"]
        return profile.total, "" if profile.reasons else " (counter exits)"
    if profile.reasons:
        if kind in ("msr_read", "msr_write") and profile.kind_count("msr"):
            if not profile.msr:  # SVM has one MSR exit for both directions
                return NEEDS["msr"]
            count = sum(m.count for m in profile.msr if m.write == (kind == "msr_write"))
            return count, " (per-MSR rows)"
        reasons = ", ".join(r.reason for r in profile.reasons if r.kind == kind)
        return profile.kind_count(kind), f" ({reasons})" if reasons else ""
    counter = KIND_COUNTERS.get(kind, "")
    if counter not in profile.counters:
        return NEEDS["reasons"]
    to_qemu = "; exits to QEMU only" if kind in ("io", "mmio") else ""
    return profile.counters[counter], f" (counter {counter}{to_qemu})"


def _measure_cpu(
    cond: CpuCond, profile: Profile, context: Mapping[str, object] | None
) -> Measurement | tuple[str, ...]:
    cpu = profile.cpu
    if cpu is None:
        return (NEEDS["cpu"],)
    host, guest = cpu.host_percent, cpu.guest_percent
    if cond.cpu != "host" and guest is None:
        return (NEEDS["guest_cpu"],)
    divisor = _per_vcpu(cond, profile, context)
    if divisor is None:
        return (NEEDS["vcpus"],)
    guest = guest or 0.0
    value = {"host": host, "guest": guest, "gap": host - guest}[cond.cpu] / divisor[0]
    unit = " points" if cond.cpu == "gap" else "%"
    text = f"{_label(cond)}: {_quantity(value, unit)}{divisor[1]}"
    if cond.cpu == "gap":
        text += f" ({host:.0f}% on the host, {guest:.0f}% in the guest)"
    elif cond.cpu == "host":
        text += " (100% = one host CPU)"
    return Measurement(value, unit, None, (text + _limits(cond),))
