"""What a benchmark run records: one sample per repetition of one metric at one level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LEVELS = ("L0", "L1", "L2")
MIGRATION_PREFIX = "migrate "
"""Workloads named ``migrate <strategy>`` are a lab's ``[[migrations]]``; the run keeps
their time series as documents of this kind."""
MIGRATION_DOCUMENT = "migrations"
NETCOMPARE_DOCUMENT = "netcompare"
"""Run documents (and the workload) of `netcompare`: paths, left-out NICs, multiqueue."""

NOT_RUN_FACT = "not run "
"""A run's host fact ``not run VARIANT``: why this host could not run that variant."""
KVM_UNDER_FACT = "kvm under "
"""A run's host fact ``kvm under LAB/GUEST [(VARIANT)]``: the KVM that guest ran under, as
read back where its QEMU ran (the nested-paging talk's paging mode per level)."""
COMPARED_BY_FACT = "configurations compared by"
"""A run's host fact: the lab's ``[bench] headline`` metrics (``workload.metric ...``)."""


@dataclass(frozen=True)
class Sample:
    """One measured value, tagged with every dimension that produced it."""

    variant: str
    """The lab variant (configuration) measured; ``default`` without variants."""
    guest: str
    """``host`` at L0, else the guest's address in the lab (``l1``, ``l1/l2``)."""
    level: str
    """``L0`` (the host), ``L1`` (a guest), ``L2`` (a nested guest)."""
    accel: str
    """How that level runs: ``native`` at L0, else the accelerator (``kvm``, ``tcg``)."""
    workload: str
    metric: str
    value: float
    unit: str
    higher_is_better: bool
    repetition: int
    command: str = ""
    """The exact command that produced the value."""


SKIPPED = "skipped: "
"""How a stored failure's message starts when a workload asked for could not run."""


@dataclass(frozen=True)
class Failure:
    """What cut a run short: where it happened, doing what, and the error."""

    variant: str
    level: str
    """``L0``, ``L1``, ``L2``, or empty when it was at no level."""
    guest: str
    """``host``, the guest's address (``l1/l2``; several joined by ``, ``), or empty."""
    stage: str
    """``boot``, a workload (``cpu``), or ``teardown``."""
    message: str
    """The error's first line."""
    exit_code: int | None
    """The exit status the error maps to (3 a component failed, 130 interrupted)."""
    detail: str = ""
    """The error's other lines (command, exit code, log tail)."""

    @property
    def where(self) -> str:
        """``L2 l1/l2`` (``tuned: L2 l1/l2`` for a variant other than ``default``)."""
        place = " ".join(p for p in (self.level, self.guest) if p) or "the run"
        return place if self.variant == "default" else f"{self.variant}: {place}"

    @property
    def doing(self) -> str:
        """``while booting``, ``during cpu``, ``while tearing down``."""
        special = {"boot": "while booting", "teardown": "while tearing down", "": ""}
        return special.get(self.stage, f"during {self.stage}")

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C (or SIGTERM, SIGHUP) cut the run short rather than an error."""
        return self.exit_code == 130

    @property
    def skipped(self) -> bool:
        """Whether this is a workload asked for that could not run here (not an error)."""
        return self.message.startswith(SKIPPED)

    @property
    def short(self) -> str:
        """``L2 l1/l2 failed while booting`` (``interrupted`` for Ctrl-C, ``did not
        measure disk`` for a workload that could not run)."""
        if self.skipped:
            return f"{self.where} did not measure {self.stage}"
        verb = "interrupted" if self.interrupted else "failed"
        return " ".join(p for p in (self.where, verb, self.doing) if p)

    @property
    def headline(self) -> str:
        """One line: ``L2 l1/l2 failed while booting: <message>``."""
        return f"{self.short}: {self.message.removeprefix(SKIPPED)}"


@dataclass
class Run:
    """One ``kvmlab bench``/``kvmlab run``: a lab, a suite, and what it measured."""

    id: int
    lab: str
    lab_file: str
    spec_digest: str
    suite: str
    kvmlab_version: str
    started: float
    ended: float | None = None
    complete: bool = False
    host: dict[str, Any] = field(default_factory=dict)
    """Host facts (CPU, KVM flavour, QEMU version, accelerator choice) at the time of the run."""
    failures: list[Failure] = field(default_factory=list)
    """What cut the run short (empty for a complete run, or an older one never finished)."""


@dataclass(frozen=True)
class Summary:
    """The repetitions of one metric at one guest, reduced to median and spread."""

    variant: str
    guest: str
    level: str
    accel: str
    workload: str
    metric: str
    unit: str
    higher_is_better: bool
    n: int
    median: float
    minimum: float
    maximum: float
    stdev: float
    command: str
    values: tuple[float, ...] = ()
    """The repetitions, in measurement order (what a change's interval is drawn from)."""

    @property
    def spread_pct(self) -> float:
        """(max - min) / median in percent: how far repetitions disagree."""
        return 100.0 * (self.maximum - self.minimum) / self.median if self.median else 0.0
