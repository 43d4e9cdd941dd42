"""Reducing repetitions to a median and spread."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

from kvmlab.results.model import Sample, Summary

Key = tuple[str, str, str, str, str]


def summarize(samples: Iterable[Sample]) -> list[Summary]:
    """One :class:`Summary` per (variant, guest, workload, metric), in first-seen order.

    O(n log n) in the samples (each group sorted once for its median). ``samples`` is read
    once, keeping of each only its value (and the first of each group): a run's samples can
    be streamed in (:meth:`kvmlab.results.store.ResultStore.iter_samples`)."""
    firsts: dict[Key, Sample] = {}
    groups: dict[Key, list[float]] = defaultdict(list)
    for s in samples:
        key = (s.variant, s.guest, s.level, s.workload, s.metric)
        if key not in firsts:
            firsts[key] = s
        groups[key].append(s.value)
    out = []
    for key, values in groups.items():
        first = firsts[key]
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
                stdev=stdev(values),
                command=first.command,
                values=tuple(values),
            )
        )
    return out


def stdev(values: list[float]) -> float:
    """The sample standard deviation (0 for fewer than two values), in floats: Python's
    :func:`statistics.stdev` works in exact fractions, a hundred times slower on a run of
    200,000 samples. Values whose squares would overflow are scaled by the largest first, so
    they give a finite figure too."""
    n = len(values)
    if n < 2:
        return 0.0
    biggest = max(abs(v) for v in values)
    scale = biggest if biggest > 1e150 else 1.0  # squares of these overflow: scale them
    scaled = [v / scale for v in values] if scale != 1.0 else values
    mean = math.fsum(scaled) / n
    return math.sqrt(math.fsum((x - mean) * (x - mean) for x in scaled) / (n - 1)) * scale


RESOLUTION = 1e-3
"""Below this the reports print ``<0.001``: a base that small has no meaningful ratio (a
boot stage of 0.4 ms against one of 1.5 s read as +3358209%)."""


def change_pct(value: float, base: float) -> float | None:
    """Relative change of ``value`` against ``base`` in percent (None when ``base`` is 0
    or too small to print)."""
    return None if abs(base) < RESOLUTION else 100.0 * (value - base) / base
