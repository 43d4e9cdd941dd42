"""One number a benchmark produced."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """A named value with its unit and the direction that counts as better."""

    name: str
    """Stable identifier, ``snake_case``, e.g. ``randread_iops``, ``rtt_avg_ms``."""
    value: float
    unit: str
    """Display unit, e.g. ``IOPS``, ``MiB/s``, ``ms``, ``Gbit/s``, ``s``."""
    higher_is_better: bool
