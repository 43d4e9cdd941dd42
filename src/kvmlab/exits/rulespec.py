"""The rules files' tables as pydantic models: rules, their conditions, fixes and examples.

A condition is a table with exactly one key that says what it reads (``kind``, ``ports``,
``msrs``, ``gpa``, ``counter``, ``cpu``, ``lab``; ``any``/``all`` group others; ``top`` is
for evidence only) and thresholds beside it. :func:`load_rules` reads an exit-profile rules
file into them, :mod:`kvmlab.exits.rules` runs them (and re-exports the loading). A
host-profile rules file (``host_rules.toml``, run by :mod:`kvmlab.exits.host_rules`) has the
same rules over its own conditions (``samples``, ``cpu = "guest"``, ``top`` of samples) and
the symbol groups they count (:func:`parse_rule_set` with ``host``).
"""

from __future__ import annotations

import string
import tomllib
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from kvmlab.errors import Problem, SpecError
from kvmlab.exits.fixes import nest
from kvmlab.exits.model import Profile
from kvmlab.exits.names import KINDS

RULES_FILE = Path(__file__).with_name("rules.toml")
"""The rules kvmlab ships."""

SCHEMA = 1
"""Version of the rules file format (``schema = 1`` at its top)."""

COUNTERS = (
    "exits",
    "io_exits",
    "mmio_exits",
    "halt_exits",
    "irq_exits",
    "signal_exits",
    "request_irq_exits",
    "irq_window_exits",
    "nmi_window_exits",
    "halt_successful_poll",
    "halt_attempted_poll",
    "halt_poll_invalid",
    "halt_wakeup",
    "halt_poll_success_ns",
    "halt_poll_fail_ns",
    "halt_wait_ns",
    "insn_emulation",
    "insn_emulation_fail",
    "pf_fault",
    "pf_guest",
    "pf_taken",
    "tlb_flush",
    "invlpg",
    "hypercalls",
    "nmi_injections",
    "irq_injections",
)
"""KVM's per-vCPU statistics as QMP ``query-stats`` names them (``Profile.counters`` keys)."""

TAGS = ("kind", "ports", "msrs", "gpa", "counter", "cpu", "top", "lab", "any", "all", "samples")
"""The key that says what a condition is about; each condition has exactly one (``top``
may name the ``samples`` it ranks)."""

HOST_TAGS = ("samples", "cpu", "top")
"""The conditions of a host-profile rules file; the others are an exit-profile file's."""


class RuleModel(BaseModel):
    """A table of the rules file: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _known_kind(kind: str) -> str:
    if kind != "all" and kind not in KINDS:
        raise ValueError(f"unknown exit kind {kind!r}; use 'all' or one of {', '.join(KINDS)}")
    return kind


def _known_counter(name: str) -> str:
    if name not in COUNTERS:
        raise ValueError(f"unknown counter {name!r}; use one of {', '.join(COUNTERS)}")
    return name


class Rates(RuleModel):
    """Thresholds of a condition that counts exits; all that are given must hold."""

    min_rate: float | None = Field(default=None, gt=0)
    """Per second at least (per vCPU with ``per_vcpu``)."""
    min_share: float | None = Field(default=None, gt=0, le=1)
    """Share of all exits at least, 0 to 1."""
    per_vcpu: bool = False
    """Divide the rate by the guest's vCPU count."""

    @property
    def has_threshold(self) -> bool:
        """Whether this is a test (in ``when``) rather than a number to quote."""
        return self.min_rate is not None or self.min_share is not None


Access = Literal["any", "read", "write"]
Port = Annotated[int, Field(ge=0, le=0xFFFF)]
Index = Annotated[int, Field(ge=0, le=0xFFFFFFFF)]


class KindCond(Rates):
    """Exits of one vendor-neutral kind (``io``, ``hlt``, ...) or of ``all`` kinds."""

    kind: str
    _kind = field_validator("kind")(_known_kind)

    @model_validator(mode="after")
    def _share_of_all(self) -> KindCond:
        if self.kind == "all" and self.min_share is not None:
            raise ValueError("min_share of all exits is always 1; drop it")
        return self


class PortCond(Rates):
    """Port I/O exits to any of ``ports``."""

    ports: list[Port] = Field(min_length=1)
    access: Access = "any"


class MsrCond(Rates):
    """MSR exits for any of ``msrs``."""

    msrs: list[Index] = Field(min_length=1)
    access: Access = "any"


class GpaCond(Rates):
    """MMIO or nested page fault exits at guest-physical addresses ``[first, last]``."""

    gpa: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]
    access: Access = "any"

    @field_validator("gpa")
    @classmethod
    def _ordered(cls, value: tuple[int, int]) -> tuple[int, int]:
        if value[0] > value[1]:
            raise ValueError("write the range as [first, last] with first <= last")
        return value


class CounterCond(Rates):
    """A KVM counter per second (``*_ns`` counters: nanoseconds per second)."""

    counter: str
    _counter = field_validator("counter")(_known_counter)

    @model_validator(mode="after")
    def _rate_only(self) -> CounterCond:
        if self.min_share is not None:
            raise ValueError("a counter has a rate, not a share of exits: use min_rate")
        return self


class CpuCond(RuleModel):
    """CPU use in percent (100 = one CPU): QEMU's on the host, the guest's own, or the gap."""

    cpu: Literal["host", "guest", "gap"]
    min: float | None = None
    max: float | None = None
    per_vcpu: bool = False

    @property
    def has_threshold(self) -> bool:
        """Whether this is a test rather than a number to quote."""
        return self.min is not None or self.max is not None


Threads = Literal["all", "vcpu", "kvm_vcpu", "main", "io", "not_vcpu"]


class Group(RuleModel):
    """Symbols a host-profile rule counts: leaves by pattern, and kernel functions with
    their callees."""

    label: str = Field(min_length=1, max_length=40)
    """The group in words (``its event loops``), as evidence quotes it."""
    about: str = Field(min_length=1)
    symbols: list[str] = []
    under: list[str] = []

    @model_validator(mode="after")
    def _some(self) -> Group:
        if not (self.symbols or self.under):
            raise ValueError("a group needs symbols or under")
        return self


class Select(RuleModel):
    """Which samples of a host-side profile: of which threads, in which class, in which
    group."""

    threads: Threads = "all"
    cls: Literal["guest", "kernel", "qemu_user", "any"] = Field("any", alias="class")
    group: str | None = None

    def words(self, groups: dict[str, Group]) -> str:
        """The selection in words (``the KVM vCPU threads in the host kernel``)."""
        if self.threads == "all":
            words = {
                "any": "QEMU",
                "guest": "QEMU's vCPUs in guest mode",
                "kernel": "QEMU in the host kernel",
                "qemu_user": "QEMU's user space",
            }[self.cls]
        else:
            words = {
                "vcpu": "the vCPU threads",
                "kvm_vcpu": "the KVM vCPU threads",
                "main": "QEMU's main thread",
                "io": "QEMU's I/O threads",
                "not_vcpu": "QEMU's threads other than vCPUs",
            }[self.threads] + {
                "any": "",
                "guest": " in guest mode",
                "kernel": " in the host kernel",
                "qemu_user": " in QEMU's user space",
            }[self.cls]
        group = groups.get(self.group or "")
        return words + (f" {group.label}" if group is not None else "")


class SamplesCond(RuleModel):
    """Host profiles: the CPU of a selection of samples, or its share of another."""

    samples: Select
    of: Select | None = None
    min_cpu: float | None = Field(default=None, ge=0)
    max_cpu: float | None = Field(default=None, ge=0)
    min_share: float | None = Field(default=None, ge=0, le=1)
    max_share: float | None = Field(default=None, ge=0, le=1)

    @property
    def has_threshold(self) -> bool:
        """Whether this is a test rather than a number to quote."""
        return any(
            v is not None for v in (self.min_cpu, self.max_cpu, self.min_share, self.max_share)
        )

    @model_validator(mode="after")
    def _share_needs_of(self) -> SamplesCond:
        if (self.min_share is not None or self.max_share is not None) and self.of is None:
            raise ValueError("a share is of something: give of = { ... }")
        return self


class TopCond(RuleModel):
    """Evidence only: the ``top`` most frequent reasons, ports, MSRs or addresses; in a
    host profile, the busiest symbols of ``samples``."""

    top: int = Field(ge=1, le=10)
    of: Literal["reasons", "ports", "msrs", "mmio"] = "reasons"
    samples: Select | None = None


Scalar = StrictBool | StrictInt | StrictFloat | StrictStr


class LabCond(RuleModel):
    """A setting of the guest (a dotted key of its lab table); all given tests must hold."""

    lab: str
    in_: list[Scalar] | None = Field(default=None, alias="in")
    not_in: list[Scalar] | None = None
    unset: bool | None = None
    """``true``: the key has no value (an unset table or timer setting)."""
    empty: bool | None = None
    """``true``: unset, or an empty list, table or string."""
    min: float | None = None
    max: float | None = None
    lacks_any: list[str] | None = None
    """The list lacks at least one of these (``hyperv.features`` without ``stimer``)."""
    unknown: Literal["assume", "skip"] = "assume"
    """Without a context: assume it holds (and say so), or leave the rule unchecked."""

    @field_validator("lab")
    @classmethod
    def _key(cls, value: str) -> str:
        return check_guest_key(value)

    @model_validator(mode="after")
    def _has_test(self) -> LabCond:
        tests = (self.in_, self.not_in, self.unset, self.empty, self.min, self.max, self.lacks_any)
        if all(t is None for t in tests):
            raise ValueError(
                "a lab condition needs in, not_in, unset, empty, min, max or lacks_any"
            )
        return self


class AnyCond(RuleModel):
    """At least one of the conditions holds."""

    any: list[Condition] = Field(min_length=2)


class AllCond(RuleModel):
    """All of the conditions hold (to group inside ``any``)."""

    all: list[Condition] = Field(min_length=2)


_TAG_OF: dict[type[BaseModel], str] = {
    KindCond: "kind",
    PortCond: "ports",
    MsrCond: "msrs",
    GpaCond: "gpa",
    CounterCond: "counter",
    CpuCond: "cpu",
    TopCond: "top",
    LabCond: "lab",
    AnyCond: "any",
    AllCond: "all",
    SamplesCond: "samples",
}


def _tag(value: Any) -> str | None:
    if isinstance(value, dict):
        found = [t for t in TAGS if t in value]
        if found == ["top", "samples"]:
            return "top"  # the samples it ranks
        return found[0] if len(found) == 1 else None
    return _TAG_OF.get(type(value))


Condition = Annotated[
    Union[  # noqa: UP007 (each member carries its Tag)
        Annotated[KindCond, Tag("kind")],
        Annotated[PortCond, Tag("ports")],
        Annotated[MsrCond, Tag("msrs")],
        Annotated[GpaCond, Tag("gpa")],
        Annotated[CounterCond, Tag("counter")],
        Annotated[CpuCond, Tag("cpu")],
        Annotated[TopCond, Tag("top")],
        Annotated[LabCond, Tag("lab")],
        Annotated[AnyCond, Tag("any")],
        Annotated[AllCond, Tag("all")],
        Annotated[SamplesCond, Tag("samples")],
    ],
    Discriminator(
        _tag,
        custom_error_type="condition",
        custom_error_message="a condition needs exactly one of: " + ", ".join(TAGS),
    ),
]
Measure = KindCond | PortCond | MsrCond | GpaCond | CounterCond | CpuCond
Selector = Measure | TopCond
AnyCond.model_rebuild()
AllCond.model_rebuild()


def check_guest_key(key: str) -> str:
    """``key`` when it names a setting of a guest (``clock.timers.hpet.present``)."""
    guest_key_type(key)
    return key


def guest_key_type(key: str) -> Any:
    """The type of the guest setting ``key`` names; ValueError when it names none."""
    from kvmlab.spec.lab import Guest

    parts = key.split(".")
    if parts[0] in ("guests", "when_tcg"):
        raise ValueError(f"{key!r}: rules read and change one guest, not its {parts[0]}")
    current: Any = Guest
    for i, part in enumerate(parts):
        current = _strip_optional(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if part not in current.model_fields:
                raise ValueError(f"{key!r}: {'.'.join(parts[:i]) or 'a guest'} has no {part!r}")
            current = current.model_fields[part].annotation
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            raise ValueError(f"{key!r}: {'.'.join(parts[:i])} is a value, not a table")
    return _strip_optional(current)


def _strip_optional(tp: Any) -> Any:
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif typing.get_origin(tp) in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) != 1:
                return tp
            tp = members[0]
        else:
            return tp


class Fix(RuleModel):
    """What to change: the guest's lab settings, the host, the guest's own configuration."""

    lab: dict[str, Any] = {}
    """Dotted guest keys set to these values (``"clock.timers.hpet.present" = true``)."""
    add: dict[str, Any] = {}
    """Dotted guest keys extended: items added to a list (``hyperv.features``), words to a
    command line (``append``; a ``key=value`` word replaces the same key)."""
    host: list[str] = []
    """Host-side steps: commands and settings (``halt_poll_ns``, IRQ affinity, isolcpus)."""
    guest: list[str] = []
    """Steps inside the guest (its clocksource, its drivers)."""
    look: list[str] = []
    """Host-profile rules: what to look at next (``{address}``: the guest)."""

    @model_validator(mode="after")
    def _valid_change(self) -> Fix:
        from kvmlab.spec.lab import Guest

        for key in [*self.lab, *self.add]:
            tp = guest_key_type(key)
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                raise ValueError(
                    f'{key!r} is a table; set its keys one by one, in quotes: "{key}.NAME" = value'
                )
        both = sorted(set(self.lab) & set(self.add))
        if both:
            raise ValueError(f"{both[0]!r} is both set (lab) and added to (add)")
        try:
            Guest.model_validate(nest({**self.lab, **self.add}))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        return self


class Example(RuleModel):
    """A small profile the rule fires on; the tests build it and try just under each
    threshold. Counts are over ``seconds`` (so per second with the default 1)."""

    seconds: float = Field(default=1.0, gt=0)
    vcpus: int = Field(default=1, ge=1)
    kinds: dict[str, Annotated[int, Field(ge=0)]] = {}
    pio: list[tuple[Port, Literal["read", "write"], Annotated[int, Field(ge=0)]]] = []
    """``[port, "read" or "write", count]`` rows."""
    msr: list[tuple[Index, Literal["read", "write"], Annotated[int, Field(ge=0)]]] = []
    mmio: list[
        tuple[Annotated[int, Field(ge=0)], Literal["read", "write"], Annotated[int, Field(ge=0)]]
    ] = []
    counters: dict[str, Annotated[int, Field(ge=0)]] = {}
    cpu: dict[Literal["host", "guest"], Annotated[float, Field(ge=0)]] = {}
    """Percent, 100 = one CPU; ``host`` is needed when ``guest`` is given (a host profile's
    comes from its ``rows``)."""
    lab: dict[str, Any] = {}
    """The context: dotted guest keys (``vcpus`` defaults to the count above)."""
    rows: list[tuple[str, Literal[".", "k", "g", "u"], str, Annotated[float, Field(ge=0)]]] = []
    """Host profiles: ``[thread, level, symbol, seconds]`` rows (level ``.``, ``k``,
    ``g``)."""
    under: list[tuple[str, str, Annotated[float, Field(ge=0)]]] = []
    """Host profiles: ``[thread, kernel function, seconds]`` rows of call-chain time."""

    @model_validator(mode="after")
    def _known_names(self) -> Example:
        for kind in self.kinds:
            if kind not in KINDS:
                raise ValueError(f"kinds: unknown exit kind {kind!r}")
        for name in self.counters:
            _known_counter(name)
        for key in self.lab:
            check_guest_key(key)
        if self.cpu and "host" not in self.cpu and not self.rows:
            raise ValueError("cpu: give host (and guest) percent")
        return self


class Rule(RuleModel):
    """One diagnosis: when it applies, what it means, what to quote and what to change."""

    id: str = Field(pattern=r"^[a-z][a-z0-9-]{1,47}$")
    title: str = Field(min_length=1, max_length=100)
    severity: Literal["high", "medium", "low"]
    cause: str = Field(min_length=1, max_length=1200)
    """What goes on, in words: a paragraph at most."""
    source: list[str] = Field(min_length=1)
    """Where the facts come from: URLs or document references."""
    when: list[Condition] = Field(min_length=1)
    evidence: list[Condition] = []
    """More numbers to quote beside those of ``when`` (no thresholds)."""
    fix: Fix
    verify: list[Condition] = []
    """What should drop once the fix is in (no thresholds)."""
    example: Example | None = None

    @field_validator("cause")
    @classmethod
    def _one_paragraph(cls, value: str) -> str:
        if "\n\n" in value.strip():
            raise ValueError("the cause is one paragraph: no blank lines")
        return value

    @field_validator("title")
    @classmethod
    def _placeholders(cls, value: str) -> str:
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
        except ValueError as exc:
            raise ValueError(f"title: {exc}") from None
        if fields - {"top_reason"}:
            raise ValueError(
                f"unknown placeholder {{{min(fields - {'top_reason'})}}}; "
                "a title knows {top_reason}"
            )
        return value

    @model_validator(mode="after")
    def _shapes(self) -> Rule:
        if not any(_measures(c) for c in self.when):
            raise ValueError("when: needs a condition on the profile, not only on the lab")
        for i, cond in enumerate(self.when):
            problem = _when_problem(cond)
            if problem:
                raise ValueError(f"when[{i}]{problem}")
        for name, conds in (("evidence", self.evidence), ("verify", self.verify)):
            allowed: tuple[str, ...] = ("kind", "ports", "msrs", "gpa", "counter", "cpu")
            allowed += ("top", "samples") if name == "evidence" else ()
            for i, cond in enumerate(conds):
                if _TAG_OF[type(cond)] not in allowed:
                    raise ValueError(f"{name}[{i}]: only {', '.join(allowed)} here")
                if isinstance(cond, Rates | CpuCond | SamplesCond) and cond.has_threshold:
                    raise ValueError(f"{name}[{i}]: names numbers to quote; no thresholds")
        return self

    def title_for(self, profile: Profile) -> str:
        """The title with ``{top_reason}`` filled in from ``profile``."""
        top = profile.sorted_reasons()
        exits = {k: v for k, v in profile.counters.items() if k.endswith("_exits")}
        name = top[0].reason if top else (max(exits, key=exits.__getitem__) if exits else "?")
        return self.title.format(top_reason=name)


def _members(cond: Condition) -> list[Condition]:
    if isinstance(cond, AnyCond):
        return cond.any
    return cond.all if isinstance(cond, AllCond) else []


def _measures(cond: Condition) -> bool:
    return isinstance(cond, Rates | CpuCond | SamplesCond) or any(
        _measures(c) for c in _members(cond)
    )


def _when_problem(cond: Condition) -> str | None:
    if isinstance(cond, TopCond):
        return ": top is for evidence, not a condition"
    if isinstance(cond, Rates | CpuCond) and not cond.has_threshold:
        return ": a condition on the profile needs a threshold: min_rate, min_share, min or max"
    if isinstance(cond, SamplesCond) and not cond.has_threshold:
        return (
            ": a condition on the samples needs a threshold: "
            "min_cpu, max_cpu, min_share or max_share"
        )
    for i, member in enumerate(_members(cond)):
        problem = _when_problem(member)
        if problem:
            return f".{_TAG_OF[type(cond)]}[{i}]{problem}"
    return None


def load_rules(path: Path | str | None = None) -> list[Rule]:
    """The rules of ``path`` (the shipped file by default); a bad file is a SpecError
    naming the rule and the field."""
    source = Path(path) if path is not None else RULES_FILE
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Problem(str(source), "", f"cannot read the rules: {exc}")]) from None
    return parse_rules(text, str(source))


def parse_rules(text: str, shown: str) -> list[Rule]:
    """Rules from the text of an exit-profile rules file; ``shown`` names the file in
    problems."""
    return parse_rule_set(text, shown).rule


class RuleSet(RuleModel):
    """A rules file: its rules and (a host-profile file's) the symbol groups they count."""

    rule: list[Rule]
    group: dict[str, Group] = {}


def parse_rule_set(text: str, shown: str, host: bool = False) -> RuleSet:
    """The rules of a rules file's text, an exit-profile file's or (``host``) a host-profile
    file's with its ``[group.NAME]`` tables; a bad file is a SpecError naming the rule and
    the field."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError([Problem(shown, "", f"TOML syntax: {exc}")]) from None
    tops = ("schema", "group", "rule") if host else ("schema", "rule")
    has = "schema, [group.NAME] and [[rule]]" if host else "schema and [[rule]]"
    problems = [
        Problem(shown, key, f"unknown key; a {'host ' if host else ''}rules file has {has}")
        for key in raw
        if key not in tops
    ]
    if raw.get("schema") != SCHEMA:
        problems.append(Problem(shown, "schema", f"must be {SCHEMA} (got {raw.get('schema')!r})"))
    groups = _groups(raw.get("group"), shown, problems) if host else {}
    tables = raw.get("rule")
    if not isinstance(tables, list) or not tables:
        problems.append(Problem(shown, "rule", "no rules: add [[rule]] tables"))
        tables = []
    rules: list[Rule] = []
    for i, table in enumerate(tables):
        name = table.get("id") if isinstance(table, dict) else None
        label = name if isinstance(name, str) and name else f"rule[{i}]"
        try:
            rule = Rule.model_validate(table)
        except ValidationError as exc:
            for err in exc.errors():
                where = _format_loc(err["loc"])
                message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
                message = message.removeprefix("Value error, ")
                problems.append(Problem(shown, f"{label}.{where}" if where else label, message))
            continue
        for where, message in _dialect(rule, groups) if host else _exit_dialect(rule):
            problems.append(Problem(shown, f"{label}.{where}", message))
        if any(r.id == rule.id for r in rules):
            problems.append(
                Problem(
                    shown, f"{label}.id", "another rule has this id (two rules cannot share one)"
                )
            )
        rules.append(rule)
    if problems:
        raise SpecError(problems)
    return RuleSet(rule=rules, group=groups)


def _groups(raw: object, shown: str, problems: list[Problem]) -> dict[str, Group]:
    """A host-profile file's ``[group.NAME]`` tables; their problems added to ``problems``."""
    if not isinstance(raw, dict):
        problems.append(Problem(shown, "group", "no symbol groups: add [group.NAME] tables"))
        return {}
    groups: dict[str, Group] = {}
    for name, table in raw.items():
        try:
            groups[name] = Group.model_validate(table)
        except ValidationError as exc:
            for err in exc.errors():
                where = ".".join(map(str, err["loc"]))
                message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
                message = message.removeprefix("Value error, ")
                problems.append(Problem(shown, f"group.{name}.{where}".rstrip("."), message))
    return groups


def _conditions(rule: Rule) -> list[tuple[str, Condition]]:
    """Every condition of ``rule`` with where it is (``when[0]``), groups' members too."""
    found: list[tuple[str, Condition]] = []

    def walk(where: str, cond: Condition) -> None:
        found.append((where, cond))
        for j, member in enumerate(_members(cond)):
            walk(f"{where}.{_TAG_OF[type(cond)]}[{j}]", member)

    for name in ("when", "evidence", "verify"):
        for i, cond in enumerate(getattr(rule, name)):
            walk(f"{name}[{i}]", cond)
    return found


def _exit_dialect(rule: Rule) -> list[tuple[str, str]]:
    """What of a host-profile rule an exit-profile rule has: (where, problem) pairs."""
    out = [
        (where, "samples are a host profile's; an exit-profile rule cannot read them")
        for where, cond in _conditions(rule)
        if isinstance(cond, SamplesCond) or (isinstance(cond, TopCond) and cond.samples)
    ]
    if rule.fix.look:
        out.append(("fix.look", "look is a host-profile rule's; give host or guest steps"))
    if rule.example is not None and (rule.example.rows or rule.example.under):
        out.append(("example.rows", "rows are a host profile's; give kinds, pio, msr, ..."))
    return out


def _dialect(rule: Rule, groups: dict[str, Group]) -> list[tuple[str, str]]:
    """What a host-profile rule has that such a rule cannot: (where, problem) pairs."""
    out: list[tuple[str, str]] = []
    for where, cond in _conditions(rule):
        tag = _TAG_OF[type(cond)]
        if tag not in HOST_TAGS:
            out.append((where, f"a host-profile rule reads {', '.join(HOST_TAGS)}, not {tag}"))
        elif isinstance(cond, CpuCond) and (cond.cpu != "guest" or cond.per_vcpu):
            out.append((f"{where}.cpu", 'a host profile knows the guest\'s own CPU: cpu = "guest"'))
        elif isinstance(cond, TopCond) and "of" in cond.model_fields_set:
            out.append((f"{where}.of", "a host profile ranks samples: top = N, samples = {...}"))
        for sel in _selections(cond):
            if sel.group is not None and sel.group not in groups:
                out.append((where, f"no [group.{sel.group}]"))
    if not any(isinstance(c, SamplesCond) for c in rule.when):
        out.append(("when", "needs a condition on the samples"))
    if not rule.fix.look:
        out.append(("fix.look", "what to look at next: at least one step"))
    if rule.fix.lab or rule.fix.add or rule.fix.guest:
        out.append(("fix", "a host-profile rule's fix has look and host steps"))
    ex = rule.example
    if ex is not None and not ex.rows:
        out.append(("example.rows", "the profile's [thread, level, symbol, seconds] rows"))
    if ex is not None and (ex.kinds or ex.pio or ex.msr or ex.mmio or ex.counters or ex.lab):
        out.append(("example", "an exit profile's counts; a host profile has rows and under"))
    return out


def _selections(cond: Condition) -> list[Select]:
    """The sample selections ``cond`` names."""
    if isinstance(cond, SamplesCond):
        return [cond.samples] + ([cond.of] if cond.of is not None else [])
    return [cond.samples] if isinstance(cond, TopCond) and cond.samples is not None else []


def _format_loc(loc: Sequence[int | str]) -> str:
    """``("when", 0, "ports", "min_rate")`` -> ``when[0].min_rate`` (union tags dropped)."""
    out = ""
    conditions = bool(loc) and loc[0] in ("when", "evidence", "verify")
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (conditions and i and isinstance(loc[i - 1], int) and part in TAGS):
            out += f".{part}" if out else part
    return out
