"""Reducing repetitions to a median and spread."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable

from kvmlab.results.model import Sample, Summary

Key = tuple[str, str, str, str, str]


def summarize(samples: Iterable[Sample]) -> list[Summary]:
    """One :class:`Summary` per (variant, guest, workload, metric), in first-seen order."""
    groups: dict[Key, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[(s.variant, s.guest, s.level, s.workload, s.metric)].append(s)
    out = []
    for group in groups.values():
        values = [s.value for s in group]
        first = group[0]
        out.append(
            Summary(
                variant=first.variant,
                guest=first.guest,
                level=first.level,
                accel=first.accel,
                workload=first.workload,
                metric=first.metric,
                unit=first.unit,
                higher_is_better=first.higher_is_better,
                n=len(values),
                median=statistics.median(values),
                minimum=min(values),
                maximum=max(values),
                stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
                command=first.command,
            )
        )
    return out


RESOLUTION = 1e-3
"""Below this the reports print ``<0.001``: a base that small has no meaningful ratio (a
boot stage of 0.4 ms against one of 1.5 s read as +3358209%)."""


def change_pct(value: float, base: float) -> float | None:
    """Relative change of ``value`` against ``base`` in percent (None when ``base`` is 0
    or too small to print)."""
    return None if abs(base) < RESOLUTION else 100.0 * (value - base) / base
