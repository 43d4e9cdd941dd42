"""The host-profile rules (``src/kvmlab/exits/host_rules.toml``): each fires on its example
and stops just past each threshold, none fires on the profiles recorded from real
processes, a missing number leaves a rule unchecked, groups count kernel time once, and a
bad rules file names what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.exits.host_rules import (
    RULES_FILE,
    evaluate,
    example_profile,
    holds,
    load_rules,
    measure,
    parse_rules,
    seconds_of,
)
from kvmlab.exits.hostprof import HostProfile, build
from kvmlab.exits.rulespec import CpuCond, Rule, RuleSet, SamplesCond, Select

RULES = load_rules()
BY_ID = {r.id: r for r in RULES.rule}
DATA = Path(__file__).parent / "data"


def fires(rule: Rule, profile: HostProfile, rules: RuleSet = RULES) -> bool:
    one = rules.model_copy(update={"rule": [rule]})
    return any(f.rule.id == rule.id for f in evaluate(profile, one).findings)


def test_the_shipped_rules() -> None:
    assert set(BY_ID) == {
        "event-loop-busy-idle-guest",
        "vcpu-threads-in-host-kernel",
        "vcpu-halt-polling",
    }
    assert set(RULES.group) == {"event_loop", "poll_kernel", "halt_polling"}
    for rule in RULES.rule:
        assert rule.example is not None, f"{rule.id} has no example"
        assert rule.source and all(s.strip() for s in rule.source)
    assert RULES_FILE.read_text().splitlines().count("[[rule]]") == len(RULES.rule)


@pytest.mark.parametrize("rule_id", sorted(BY_ID))
def test_each_rule_fires_on_its_example(rule_id: str) -> None:
    rule = BY_ID[rule_id]
    assert rule.example is not None
    diagnosis = evaluate(example_profile(rule.example), address="lab/l1/vm")
    finding = next(f for f in diagnosis.findings if f.rule.id == rule_id)
    assert all("[rule: " in line for line in finding.evidence[: len(rule.when)])
    assert finding.look and all("{address}" not in step for step in finding.look)
    assert any("lab/l1/vm" in step for step in finding.look)
    doc = finding.to_json()
    assert doc["rule"] == rule_id and doc["fix"]["look"] == list(finding.look)
    assert 0 < doc["weight"] <= 1


def _past(cond: SamplesCond | CpuCond, got_cpu: float, got_share: float | None) -> dict[str, float]:
    """Each threshold moved just past what was measured (one change per entry)."""
    moved = {}
    if isinstance(cond, CpuCond):
        if cond.min is not None:
            moved["min"] = got_cpu * 1.01 + 0.01
        if cond.max is not None:
            moved["max"] = got_cpu * 0.99 - 0.01
        return moved
    if cond.min_cpu is not None:
        moved["min_cpu"] = got_cpu * 1.01 + 0.01
    if cond.max_cpu is not None:
        moved["max_cpu"] = max(0.0, got_cpu * 0.99 - 0.01)
    if cond.min_share is not None and got_share is not None:
        moved["min_share"] = min(1.0, got_share * 1.01 + 0.001)
    if cond.max_share is not None and got_share is not None:
        moved["max_share"] = max(0.0, got_share * 0.99 - 0.001)
    return moved


@pytest.mark.parametrize("rule_id", sorted(BY_ID))
def test_each_rule_stops_just_past_each_threshold(rule_id: str) -> None:
    rule = BY_ID[rule_id]
    assert rule.example is not None
    profile = example_profile(rule.example)
    tried = 0
    for i, cond in enumerate(rule.when):
        assert isinstance(cond, SamplesCond | CpuCond)  # rulespec's: a host rule's are these
        got = measure(cond, profile, RULES.group)
        assert not isinstance(got, str)
        assert holds(cond, got)
        for key, value in _past(cond, got.cpu, got.share).items():
            if key.endswith("share") and not 0 <= value <= 1:
                continue
            when = list(rule.when)
            when[i] = cond.model_copy(update={key: value})
            assert not fires(rule.model_copy(update={"when": when}), profile), (i, key)
            tried += 1
    assert tried >= len(rule.when)


def test_without_the_guests_cpu_a_rule_is_unchecked_not_fired() -> None:
    rule = BY_ID["event-loop-busy-idle-guest"]
    assert rule.example is not None
    profile = example_profile(rule.example)
    profile.guest_cpu = None
    diagnosis = evaluate(profile)
    assert "event-loop-busy-idle-guest" not in [f.rule.id for f in diagnosis.findings]
    assert any(
        line.startswith("not checked: event-loop-busy-idle-guest")
        and "the guest's own CPU use" in line
        for line in diagnosis.unchecked
    )
    profile.guest_cpu = 60.0  # a busy guest: the loop is its work
    assert not fires(rule, profile)


def test_groups_count_kernel_time_once() -> None:
    """With call chains the kernel part of a group is the time under its functions (the
    largest per thread: they nest), its kernel leaves are not added again; without them,
    the leaves count."""
    rule = BY_ID["event-loop-busy-idle-guest"]
    assert rule.example is not None
    profile = example_profile(rule.example)
    poll = Select(cls="kernel", group="poll_kernel")
    assert seconds_of(profile, poll, RULES.group) == pytest.approx(0.33)
    main = profile.pid
    profile.inclusive[(main, "__x64_sys_ppoll")] = 0.30  # nested inside do_sys_poll's 0.33
    assert seconds_of(profile, poll, RULES.group) == pytest.approx(0.33)
    profile.inclusive.clear()
    leaves = seconds_of(profile, poll, RULES.group)
    assert leaves == pytest.approx(0.28 + 0.05), "sock_poll and do_sys_poll themselves"


@pytest.mark.parametrize(
    ("name", "accel"),
    [
        ("hostprof-qemu-tcg-paused-qmp.txt", "tcg"),
        ("hostprof-qemu-tcg-paused-idle.txt", "tcg"),
        ("hostprof-yes.txt", "kvm"),
    ],
)
def test_no_rule_fires_on_the_recorded_profiles(name: str, accel: str) -> None:
    profile = build((DATA / name).read_text(), "lab/vm", "this host", accel, 3.0, 199, "perf")
    profile.guest_cpu = 0.0  # a paused guest runs nothing
    diagnosis = evaluate(profile)
    assert diagnosis.findings == [] and diagnosis.unchecked == []


def test_the_recorded_qmp_profile_measures_its_event_loop() -> None:
    """The paused QEMU answering QMP as fast as it can: its monitor thread is busy in the
    kernel's socket calls, its loops a small part of its user space (so the event-loop rule
    stays quiet), and its main thread's kernel time is mostly under ppoll."""
    text = (DATA / "hostprof-qemu-tcg-paused-qmp.txt").read_text()
    profile = build(text, "lab/vm", "this host", "tcg", 3.0, 199, "perf")
    rule = BY_ID["event-loop-busy-idle-guest"]
    share = measure(rule.when[0], profile, RULES.group)
    assert not isinstance(share, str) and share.share is not None
    assert 0.05 < share.share < 0.33
    main_kernel = seconds_of(profile, Select(threads="main", cls="kernel"), RULES.group)
    polled = seconds_of(
        profile, Select(threads="main", cls="kernel", group="poll_kernel"), RULES.group
    )
    assert 0.5 < polled / main_kernel <= 1.0


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (('group = "halt_polling" }', 'group = "nope" }'), "no [group.nope]"),
        (("min_share = 0.25\n", "min_share = 0.25\nmin_cpu = -1\n"), "greater than or equal"),
        (
            ('[[rule.when]]\ncpu = "guest"\nmax = 30\n', '[[rule.when]]\ncpu = "guest"\n'),
            "threshold",
        ),
        (('id = "vcpu-halt-polling"', 'id = "vcpu-threads-in-host-kernel"'), "two rules"),
        (('of = { threads = "kvm_vcpu" }\nmin_share = 0.25', "min_share = 0.25"), "a share is of"),
        (("schema = 1", "schema = 2"), "schema"),
        (('severity = "medium"', 'severity = "urgent"'), "severity"),
    ],
)
def test_a_bad_rules_file_names_the_problem(change: tuple[str, str], problem: str) -> None:
    text = RULES_FILE.read_text()
    assert change[0] in text, change[0]
    with pytest.raises(SpecError) as raised:
        parse_rules(text.replace(change[0], change[1], 1), "rules.toml")
    assert problem in str(raised.value), str(raised.value)
    assert str(raised.value).startswith("rules.toml")
