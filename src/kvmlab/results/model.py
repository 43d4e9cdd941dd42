"""What a benchmark run records: one sample per repetition of one metric at one level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LEVELS = ("L0", "L1", "L2")


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

    @property
    def spread_pct(self) -> float:
        """(max - min) / median in percent: how far repetitions disagree."""
        return 100.0 * (self.maximum - self.minimum) / self.median if self.median else 0.0
