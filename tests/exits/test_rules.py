"""The diagnosis rules: the shipped file, each rule at and just under its thresholds, the
evidence lines, unchecked rules, fix plans and a bad rules file's problems."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from kvmlab.errors import SpecError
from kvmlab.exits.fixes import guest_context, lookup, plan_fix
from kvmlab.exits.model import CpuWindow, MmioStat, MsrStat, PioStat, Profile, ReasonStat
from kvmlab.exits.rules import (
    Finding,
    Rule,
    diagnose,
    evaluate,
    load_rules,
    measure,
    parse_rules,
    verify_fix,
)
from kvmlab.exits.rulespec import (
    AllCond,
    AnyCond,
    Condition,
    CounterCond,
    CpuCond,
    Example,
    GpaCond,
    KindCond,
    LabCond,
    MsrCond,
    PortCond,
    Rates,
)
from kvmlab.spec import load_lab
from tests.conftest import LABS

RULES = load_rules()
BY_ID = {r.id: r for r in RULES}


def example_profile(ex: Example) -> Profile:
    """The profile an example block describes (reasons named after their kinds)."""
    total = sum(ex.kinds.values())
    cpu = None
    if ex.cpu:
        guest = ex.cpu.get("guest")
        cpu = CpuWindow(
            seconds=ex.seconds,
            host_user=ex.cpu["host"] / 100 * ex.seconds,
            host_system=0.0,
            host_guest=0.0,
            guest_busy=None if guest is None else guest / 100 * ex.seconds,
            guest_total=None if guest is None else ex.vcpus * ex.seconds,
        )
    return Profile(
        address="example/guest",
        provider="example",
        provider_note="a rule's example",
        seconds=ex.seconds,
        reasons=[ReasonStat(reason=k.upper(), kind=k, count=n) for k, n in ex.kinds.items()],
        vcpus={i: total // ex.vcpus for i in range(ex.vcpus)} if total else {},
        pio=[PioStat(port=p, write=d == "write", count=n) for p, d, n in ex.pio],
        msr=[MsrStat(index=i, write=d == "write", count=n) for i, d, n in ex.msr],
        mmio=[MmioStat(gpa=g, write=d == "write", count=n) for g, d, n in ex.mmio],
        counters=dict(ex.counters),
        cpu=cpu,
    )


def example_context(ex: Example) -> dict[str, object]:
    return {"vcpus": ex.vcpus, **ex.lab}


def fired(rule: Rule, ex: Example, context: dict[str, object] | None = None) -> Finding | None:
    ctx = example_context(ex) if context is None else context
    return next((f for f in diagnose(example_profile(ex), ctx, [rule]) if f.id == rule.id), None)


# --- the shipped file ------------------------------------------------------------------------


def test_shipped_rules_cover_the_brief() -> None:
    ids = {r.id for r in RULES}
    assert len(RULES) >= 12 and len(ids) == len(RULES)
    assert {
        "rtc-port-storm",
        "acpi-pm-timer-reads",
        "hpet-mmio-reads",
        "pit-port-storm",
        "tsc-deadline-writes",
        "x2apic-ipi-storm",
        "halt-polling-burn",
        "pause-exits-unpinned",
        "external-interrupt-exits",
        "npf-no-hugepages",
        "msr-unhandled-reads",
        "windows-no-enlightenments",
        "interrupt-window-exits",
        "insn-emulation",
        "busy-host-idle-guest",
    } <= ids


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_is_complete(rule: Rule) -> None:
    assert rule.example is not None, "every rule carries an [rule.example] the tests run"
    assert rule.source and rule.verify and rule.cause.strip()
    assert rule.fix.lab or rule.fix.add or rule.fix.host or rule.fix.guest


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_example_fires_with_numbers_and_units(rule: Rule) -> None:
    assert rule.example is not None
    finding = fired(rule, rule.example)
    assert finding is not None, f"{rule.id} does not fire on its own example"
    assert not finding.assumed  # the example's lab settings decide every lab condition
    measured = [line for line in finding.evidence if "[rule:" in line]
    assert measured and all(any(u in line for u in ("/s", "%", "points")) for line in measured)
    assert len(finding.verify) == len(rule.verify)
    assert "{" not in finding.title


# --- just under each threshold ---------------------------------------------------------------

EPS = 0.03


def _scale_rows(rows: list[tuple[int, str, int]], keep: Any, f: float, up: bool) -> list[Any]:
    rnd = math.ceil if up else math.floor
    return [[k, d, rnd(n * f) if keep(k, d) else n] for k, d, n in rows]


def scaled(ex: Example, cond: Condition, f: float, up: bool = False) -> Example:
    """``ex`` with what ``cond`` counts multiplied by ``f`` (rounded down, or up)."""
    rnd = math.ceil if up else math.floor
    data = ex.model_dump()
    if isinstance(cond, KindCond):
        data["kinds"] = {
            k: rnd(n * f) if cond.kind in ("all", k) else n for k, n in ex.kinds.items()
        }
    elif isinstance(cond, CounterCond):
        data["counters"] = {**ex.counters, cond.counter: rnd(ex.counters[cond.counter] * f)}
    elif isinstance(cond, PortCond | MsrCond | GpaCond):

        def keep(key: int, direction: str) -> bool:
            inside = (
                cond.gpa[0] <= key <= cond.gpa[1]
                if isinstance(cond, GpaCond)
                else key in (cond.ports if isinstance(cond, PortCond) else cond.msrs)
            )
            return inside and cond.access in ("any", direction)

        fields: dict[type, str] = {PortCond: "pio", MsrCond: "msr", GpaCond: "mmio"}
        field = fields[type(cond)]
        data[field] = _scale_rows(getattr(ex, field), keep, f, up)
    elif isinstance(cond, CpuCond):
        host, guest = ex.cpu["host"], ex.cpu.get("guest", 0.0)
        if cond.cpu == "host":
            data["cpu"] = {**ex.cpu, "host": host * f}
        elif cond.cpu == "guest":
            data["cpu"] = {"host": host + guest * (f - 1), "guest": guest * f}  # gap unchanged
        else:
            data["cpu"] = {**ex.cpu, "host": guest + (host - guest) * f}
    return Example.model_validate(data)


def factor(cond: Condition, ex: Example, which: str, margin: float) -> float:
    """The factor that puts what ``cond`` measures at its ``which`` threshold times
    ``margin``."""
    m = measure(cond, example_profile(ex), example_context(ex))  # type: ignore[arg-type]
    assert not isinstance(m, tuple), m
    if which == "min_share":
        assert isinstance(cond, Rates) and cond.min_share is not None and m.share
        target = cond.min_share * margin
        if not isinstance(cond, KindCond):
            return target / m.share
        profile = example_profile(ex)
        count, total = m.share * profile.total, profile.total
        return target * (total - count) / (count * (1 - target))
    limit = getattr(cond, which)
    return float(limit * margin / m.value)


def thresholds(cond: Condition) -> list[str]:
    names = ["min_rate", "min_share"] if isinstance(cond, Rates) else ["min", "max"]
    return [n for n in names if getattr(cond, n, None) is not None]


def under(cond: Condition, ex: Example) -> Example | None:
    """``ex`` with ``cond`` just failing, or None when it is not about the profile."""
    if isinstance(cond, AllCond):
        return next((u for c in cond.all if (u := under(c, ex)) is not None), None)
    if isinstance(cond, AnyCond):
        for member in cond.any:
            pushed = under(member, ex)
            if pushed is None:
                return None
            ex = pushed
        return ex
    if isinstance(cond, LabCond):
        return None
    if isinstance(measure(cond, example_profile(ex), example_context(ex)), tuple):  # type: ignore[arg-type]
        return ex  # the example lacks its data: it cannot hold
    which = thresholds(cond)[0]
    down = which != "max"
    return scaled(ex, cond, factor(cond, ex, which, 1 - EPS if down else 1 + EPS), up=not down)


def _threshold_cases() -> list[Any]:
    cases = []
    for rule in RULES:
        for i, cond in enumerate(rule.when):
            for which in thresholds(cond) if not isinstance(cond, AnyCond | AllCond) else ["*"]:
                cases.append(pytest.param(rule, i, which, id=f"{rule.id}-when{i}-{which}"))
    return cases


@pytest.mark.parametrize(("rule", "index", "which"), _threshold_cases())
def test_just_under_a_threshold_does_not_fire(rule: Rule, index: int, which: str) -> None:
    ex, cond = rule.example, rule.when[index]
    assert ex is not None
    if which == "*":
        pushed = under(cond, ex)
        if pushed is None:
            pytest.skip("a group with lab conditions")
    else:
        margin = 1 + EPS if which == "max" else 1 - EPS
        pushed = scaled(ex, cond, factor(cond, ex, which, margin), up=which == "max")
        assert factor(cond, ex, which, 1.0) <= 1.0 or which == "max", "example under threshold"
    assert fired(rule, pushed) is None, f"{rule.id} still fires just past when[{index}]"


@pytest.mark.parametrize(
    ("rule", "index", "which"),
    [
        c
        for c in _threshold_cases()
        if c.values[2] in ("min_rate", "min")
        and len(thresholds(c.values[0].when[c.values[1]])) == 1
    ],
)
def test_just_over_a_threshold_fires(rule: Rule, index: int, which: str) -> None:
    ex, cond = rule.example, rule.when[index]
    assert ex is not None
    pushed = scaled(ex, cond, factor(cond, ex, which, 1 + EPS), up=True)
    assert fired(rule, pushed) is not None, f"{rule.id} is silent just over when[{index}]"


# --- without a lab, without the data ---------------------------------------------------------


def reads_lab(cond: Condition) -> bool:
    members = (
        cond.any if isinstance(cond, AnyCond) else (cond.all if isinstance(cond, AllCond) else [])
    )
    return isinstance(cond, LabCond) or any(reads_lab(c) for c in members)


@pytest.mark.parametrize(
    "rule", [r for r in RULES if any(map(reads_lab, r.when))], ids=lambda r: r.id
)
def test_without_a_lab_rules_assume_or_wait(rule: Rule) -> None:
    assert rule.example is not None
    result = evaluate(example_profile(rule.example), None, [rule])
    found = [f for f in result.findings if f.id == rule.id]
    waiting = [u for u in result.unchecked if u.rule == rule.id]
    assert (found and found[0].assumed) or (waiting and "the lab file" in str(waiting[0]))


SEED_BEFORE = {
    "IO_INSTRUCTION": ("io", 55654),
    "MSR_READ": ("msr_read", 7114),
    "MSR_WRITE": ("msr_write", 3781),
    "HLT": ("hlt", 2933),
    "EXTERNAL_INTERRUPT": ("external_interrupt", 731),
    "PENDING_INTERRUPT": ("interrupt_window", 413),
}
SEED_AFTER = {
    "MSR_READ": ("msr_read", 1501),
    "MSR_WRITE": ("msr_write", 192),
    "HLT": ("hlt", 174),
    "IO_INSTRUCTION": ("io", 50),
}


def perf_profile(rows: dict[str, tuple[str, int]], **extra: Any) -> Profile:
    """A ``perf kvm stat live`` window of one second, as the idle-guest exit-storm write-up
    shows it."""
    reasons = [ReasonStat(reason=r, kind=k, count=n) for r, (k, n) in rows.items()]
    return Profile(
        address="seed/win10",
        provider="perf",
        provider_note="",
        seconds=1.0,
        vendor="vmx",
        reasons=reasons,
        **extra,
    )


def test_seed_001_from_perf_alone() -> None:
    result = evaluate(perf_profile(SEED_BEFORE), {"vcpus": 2, "clock.offset": "localtime"})
    ids = [f.id for f in result.findings]
    assert ids[0] == "windows-no-enlightenments" and "io-exit-storm" in ids
    storm = next(f for f in result.findings if f.id == "io-exit-storm")
    assert storm.evidence[0].startswith("io exits (IO_INSTRUCTION): 27827/s per vCPU (2 vCPUs)")
    rtc = next(u for u in result.unchecked if u.rule == "rtc-port-storm")
    assert "exits per I/O port (tracepoints: kvm:kvm_pio)" in rtc.needs
    checks = verify_fix(BY_ID["io-exit-storm"], perf_profile(SEED_BEFORE), perf_profile(SEED_AFTER))
    assert [(c.before, c.after, c.dropped) for c in checks] == [(55654, 50, True)]


def test_port_evidence_names_the_port_and_its_share() -> None:
    pio = [
        PioStat(port=0x71, write=False, count=19840),
        PioStat(port=0x70, write=True, count=19840),
        PioStat(port=0x608, write=False, count=400),
    ]
    profile = perf_profile({"IO_INSTRUCTION": ("io", 40080), "HLT": ("hlt", 8320)}, pio=pio)
    profile.seconds = 10.0
    (rtc,) = [f for f in diagnose(profile, {"vcpus": 2}) if f.id == "rtc-port-storm"]
    assert "port 0x71 (RTC data (CMOS)) reads: 1984/s" in rtc.evidence
    assert rtc.evidence[2] == (
        "exits at ports 0x70, 0x71 in all: 3968/s, 82% of exits [rule: >= 500/s]"
    )


def test_counters_only_profile() -> None:
    profile = Profile(
        address="a/b",
        provider="qmp",
        provider_note="",
        seconds=2.0,
        vcpus={0: 0, 1: 0},
        counters={
            "exits": 120000,
            "io_exits": 100000,
            "halt_poll_fail_ns": 600_000_000,
            "halt_exits": 4000,
        },
    )
    result = evaluate(profile, None)
    ids = [f.id for f in result.findings]
    assert "io-exit-storm" in ids and "halt-polling-burn" in ids
    storm = next(f for f in result.findings if f.id == "io-exit-storm")
    assert "(counter io_exits; exits to QEMU only)" in storm.evidence[0]
    poll = next(f for f in result.findings if f.id == "halt-polling-burn")
    assert "counter halt_poll_fail_ns: 150 ms/s per vCPU (2 vCPUs)" in poll.evidence[0]
    unchecked = {u.rule: u.needs for u in result.unchecked}
    assert any("tracepoints" in n for n in unchecked["rtc-port-storm"])
    assert unchecked["busy-host-idle-guest"] == ("host and guest CPU use over the window",)


def test_svm_msr_direction_comes_from_msr_rows() -> None:
    rule = BY_ID["msr-read-storm-named-model"]
    svm = Profile(
        address="a/b",
        provider="t",
        provider_note="",
        seconds=1.0,
        vendor="svm",
        reasons=[ReasonStat(reason="msr", kind="msr", count=10000)],
    )
    ctx = {"vcpus": 2, "cpu.model": "qemu64"}
    assert [u.rule for u in evaluate(svm, ctx, [rule]).unchecked] == [rule.id]
    svm.msr = [
        MsrStat(index=0x10, write=False, count=9000),
        MsrStat(index=0x6E0, write=True, count=1000),
    ]
    (finding,) = diagnose(svm, ctx, [rule])
    assert finding.evidence[0].startswith("msr_read exits (per-MSR rows): 4500/s per vCPU")


def test_findings_are_ordered_by_severity_then_weight() -> None:
    ex = BY_ID["rtc-port-storm"].example
    assert ex is not None
    findings = diagnose(example_profile(ex), example_context(ex))
    ranks = [("high", "medium", "low").index(f.severity) for f in findings]
    assert ranks == sorted(ranks) and findings[0].severity == "high"
    highs = [f.weight for f in findings if f.severity == "high"]
    assert highs == sorted(highs, reverse=True)
    assert findings[0].to_json()["fix"]["lab"]


# --- fixes planned against the guest ---------------------------------------------------------


def test_rtc_fix_is_what_the_lab_lacks() -> None:
    lab = load_lab(LABS / "windows-hpet.toml").lab
    guest = lab.guests["win10"]
    rule = BY_ID["rtc-port-storm"]
    context = guest_context(guest)
    assert lookup(context, "clock.timers.hpet.present") is True
    plan = plan_fix(rule.fix.lab, rule.fix.add, rule.fix.host, rule.fix.guest, context)
    assert plan.lab == {}  # windows-hpet.toml has the fix already
    no_hpet = guest.model_copy(
        update={
            "clock": guest.clock.model_copy(
                update={
                    "timers": guest.clock.timers.model_copy(update={"hpet": guest.clock.timers.rtc})
                }
            )
        }
    )
    plan = plan_fix(rule.fix.lab, rule.fix.add, (), (), guest_context(no_hpet))
    assert plan.lab == {"clock.timers.hpet.present": True}


def test_added_items_keep_the_guests_own() -> None:
    plan = plan_fix(
        {},
        {
            "hyperv.features": ["vapic", "stimer"],
            "cpu.features": ["+x2apic"],
            "append": "clocksource=kvm-clock",
        },
        (),
        (),
        {
            "hyperv": {"features": ["relaxed", "vapic"]},
            "cpu.features": ["-x2apic"],
            "append": "quiet clocksource=hpet",
        },
    )
    assert plan.lab == {
        "hyperv.features": ["relaxed", "vapic", "stimer"],
        "cpu.features": ["+x2apic"],
        "append": "quiet clocksource=kvm-clock",
    }
    disk = plan_fix({}, {"append": "clocksource=kvm-clock"}, (), ("g",), {"boot": "disk"})
    assert disk.lab == {} and disk.guest[0] == "g" and "GRUB_CMDLINE_LINUX" in disk.guest[1]


def test_lookup_reads_flat_and_nested_contexts() -> None:
    assert lookup({"a": {"b": {"c": 1}}}, "a.b.c") == 1
    assert lookup({"a.b.c": 1}, "a.b") == {"c": 1}
    assert lookup({"a": None}, "a.b") is None


# --- a bad rules file ------------------------------------------------------------------------

GOOD = """
schema = 1
[[rule]]
id = "rr"
title = "t"
severity = "low"
cause = "c"
source = ["s"]
verify = [{ kind = "io" }]
[[rule.when]]
kind = "io"
min_rate = 5
[rule.fix]
host = ["h"]
"""


@pytest.mark.parametrize(
    ("change", "where", "says"),
    [
        (("min_rate = 5", "min_rate = 5\nmin_rat = 2"), "rr.when[0].min_rat", "unknown key"),
        (('kind = "io"\nmin', 'kind = "iox"\nmin'), "rr.when[0].kind", "unknown exit kind 'iox'"),
        (('kind = "io"\nmin', 'kind = "io"\nports = [1]\nmin'), "rr.when[0]", "exactly one of"),
        (("min_rate = 5", "min_rate = -1"), "rr.when[0].min_rate", "greater than 0"),
        (("min_rate = 5", 'lab = "x"'), "rr.when[0]", "exactly one of"),
        (
            (
                "[rule.fix]",
                '[[rule.when]]\nlab = "clock.timers.hpet.presnt"\nunset = true\n[rule.fix]',
            ),
            "rr.when[1].lab",
            "no 'presnt'",
        ),
        (
            ('verify = [{ kind = "io" }]', 'verify = [{ kind = "io", min_rate = 1 }]'),
            "rr",
            "verify[0]: names numbers to quote",
        ),
        (
            ('host = ["h"]', 'lab = { "clock.timers.hpet.present" = "maybe" }'),
            "rr.fix",
            "clock.timers.hpet.present",
        ),
        (('host = ["h"]', 'lab = { clock = { offset = "utc" } }'), "rr.fix", "is a table"),
        (('title = "t"', 'title = "t {oops}"'), "rr.title", "unknown placeholder {oops}"),
        (("schema = 1", "schema = 2"), "schema", "must be 1"),
        (('cause = "c"', 'cause = "one\\n\\ntwo"'), "rr.cause", "one paragraph"),
    ],
)
def test_bad_rules_name_the_rule_and_field(change: tuple[str, str], where: str, says: str) -> None:
    text = GOOD.replace(*change, 1)
    assert text != GOOD
    with pytest.raises(SpecError) as caught:
        parse_rules(text, "my-rules.toml")
    problems = [(p.file, p.path, p.message) for p in caught.value.problems]
    assert any(f == "my-rules.toml" and p == where and says in m for f, p, m in problems), problems


def test_good_rules_file_and_duplicate_ids(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(GOOD)
    assert [r.id for r in load_rules(path)] == ["rr"]
    with pytest.raises(SpecError, match="another rule has this id"):
        parse_rules(GOOD + GOOD.split("schema = 1", 1)[1], "x")
    with pytest.raises(SpecError, match="cannot read the rules"):
        load_rules(tmp_path / "missing.toml")
