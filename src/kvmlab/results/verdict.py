"""A change between two sets of repetitions, with its confidence and a verdict.

Benchmarks here are few (3 to 10 repetitions), skewed and noisy, so a difference of medians
says little on its own. Each change is reported as the ratio of the medians (B over A, what
the tables' columns show) with a 95 % interval of the ratio from Welch's t on the
logarithms of the values (the ratio of geometric means: a ratio is symmetric on a log
scale, and skewed timings are closer to log-normal than to normal). Welch's t was chosen
over a bootstrap of the medians because the bootstrap is anti-conservative at the sizes
kvmlab takes: on pairs of samples drawn from one distribution it called 12 % of them
changed at 3 repetitions, Welch's t on logs 3-4 % (``tests/results/test_verdict.py`` holds
this). The verdict:

- **no significant change**: the interval holds 1 (B could be A);
- **within noise**: the interval excludes 1 but the change (median against median) lies
  inside the workload's noise threshold (:data:`NOISE_BY_WORKLOAD`): real within these
  repetitions, perhaps, and no larger than two runs of the same configuration differ here;
- **better** or **worse**: the interval lies beyond 1 and the change is past the threshold,
  in the direction ``higher_is_better`` says is good.

Repetitions within one run share that run's conditions (the host's page cache, its disk's
state, a neighbour), so their interval says nothing of how two runs differ. The thresholds
are that difference, measured: A/A runs (the same lab and suite, nothing changed) on a
2-core host of the kind kvmlab is tested on (docs/measurements.md, "Noise between runs").

With one repetition on either side there is no interval and no verdict but "single run".
"""

from __future__ import annotations

import enum
import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
NOISE = 0.05
"""The noise threshold of a workload without one of its own: a change (median against
median) within ±5 % is not called better or worse."""
NOISE_BY_WORKLOAD = {
    "cpu": 0.10,
    "memory": 0.20,
    "disk": 0.40,
    "network": 0.30,
    "network.ping_rtt_avg_ms": 2.0,
    "network.ping_rtt_mdev_ms": 2.0,
    "boot": 0.15,
}
"""How far the medians of A/A runs (eight of the lab ``basic``, 2026-11-28) were apart on a
2-core host of this kind, the largest of each workload's metrics at L0 and L1 rounded up
(docs/measurements.md, "Noise between runs"): a change within it is not called. Ping's
round trips (tens of microseconds on the host, scheduling more than network) have their own:
they moved by up to 148 % between two runs."""
METHOD = (
    "change: median against median; interval: 95 % Welch interval of the ratio of geometric "
    "means; better or worse only when the interval excludes no change and the change is past "
    "the workload's noise threshold"
)


def noise_for(workload: str, metric: str = "") -> float:
    """The noise threshold of ``metric`` of ``workload`` (its own, else its workload's)."""
    own = NOISE_BY_WORKLOAD.get(f"{workload}.{metric}")
    return own if own is not None else NOISE_BY_WORKLOAD.get(workload, NOISE)


def thresholds_text() -> str:
    """``cpu ±10%, memory ±20%, ...; others ±5%``: the thresholds, for legends."""
    each = ", ".join(f"{w.replace('network.', '')} ±{n:.0%}" for w, n in NOISE_BY_WORKLOAD.items())
    return f"{each}; others ±{NOISE:.0%}"


class Verdict(enum.Enum):
    """What a change is, as reports print it."""

    BETTER = "better"
    WORSE = "worse"
    NO_CHANGE = "no significant change"
    NOISE = "within noise"
    SINGLE = "single run"
    """One repetition on a side: no interval can be drawn."""

    @property
    def called(self) -> bool:
        """Whether the change is significant and past the noise (better or worse)."""
        return self in (Verdict.BETTER, Verdict.WORSE)


@dataclass(frozen=True)
class Change:
    """B against A: the ratio of medians, its interval, the verdict."""

    ratio: float
    """median(B) / median(A)."""
    low: float | None
    high: float | None
    """The interval of the ratio (None for a single run or a zero base)."""
    verdict: Verdict
    noise: float

    @property
    def pct(self) -> float:
        """The change in percent (+10.0: B is 10 % above A)."""
        return 100.0 * (self.ratio - 1.0)

    def interval_pct(self) -> tuple[float, float] | None:
        """The interval in percent of A, or None."""
        if self.low is None or self.high is None:
            return None
        return 100.0 * (self.low - 1.0), 100.0 * (self.high - 1.0)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 3e-14:
            break
    return h


def _ibeta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (``p`` above 0.5), by bisection on its distribution function
    (degrees of freedom rounded to a hundredth: the quantile moves far less than that)."""
    return _t_quantile(p, round(df, 2))


@functools.lru_cache(maxsize=4096)
def _t_quantile(p: float, df: float) -> float:
    low, high = 0.0, 1e4
    for _ in range(200):
        mid = (low + high) / 2
        tail = 0.5 * _ibeta(df / 2, 0.5, df / (df + mid * mid))
        if 1.0 - tail < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """The 95 % Welch interval of the difference of means of ``b`` and ``a``."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(b) - statistics.fmean(a)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    t = t_quantile(1.0 - (1.0 - CONFIDENCE) / 2, df)
    return diff - t * se, diff + t * se


def compare(
    a: Sequence[float], b: Sequence[float], higher_is_better: bool, noise: float = NOISE
) -> Change | None:
    """The change from ``a`` to ``b``; None when either is empty or A's median is 0 (no
    ratio). Values that are not all positive (a count that can be 0) get the interval of
    the difference of means over A's mean instead of the log ratio."""
    if not a or not b:
        return None
    a, b = [float(v) for v in a], [float(v) for v in b]
    base = statistics.median(a)
    try:
        ratio = statistics.median(b) / base
    except (ZeroDivisionError, OverflowError):
        return None
    if not math.isfinite(ratio):
        return None
    if len(a) < 2 or len(b) < 2:
        return Change(ratio, None, None, Verdict.SINGLE, noise)
    try:
        low, high = _interval(a, b)
    except (OverflowError, ValueError, ZeroDivisionError):  # values past a float's range
        return Change(ratio, None, None, Verdict.NO_CHANGE, noise)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Change(ratio, None, None, Verdict.NO_CHANGE, noise)
    return Change(ratio, low, high, _verdict(low, high, ratio, higher_is_better, noise), noise)


def _interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """The interval of the ratio B/A (see the module docstring)."""
    if min(a) > 0 and min(b) > 0:
        low, high = _welch([math.log(v) for v in a], [math.log(v) for v in b])
        return math.exp(max(min(low, 700.0), -700.0)), math.exp(max(min(high, 700.0), -700.0))
    mean = statistics.fmean(a)
    d_low, d_high = _welch(a, b)
    low, high = sorted((1.0 + d_low / mean, 1.0 + d_high / mean))
    return low, high


def _verdict(
    low: float, high: float, ratio: float, higher_is_better: bool, noise: float
) -> Verdict:
    if low <= 1.0 <= high:
        return Verdict.NO_CHANGE
    up = low > 1.0
    if abs(ratio - 1.0) <= noise or (ratio > 1.0) != up:  # small, or medians disagree
        return Verdict.NOISE
    return Verdict.BETTER if up == higher_is_better else Verdict.WORSE


def precision(values: Sequence[float]) -> float | None:
    """How precisely ``values`` place their centre: the half-width of the 95 % interval of
    their geometric mean, relative (0.05: within ±5 %); of the arithmetic mean over the
    mean when a value is not positive. None with fewer than 2 values or a zero mean."""
    if len(values) < 2:
        return None
    xs = [float(v) for v in values]
    t = t_quantile(1.0 - (1.0 - CONFIDENCE) / 2, len(xs) - 1)
    try:
        if min(xs) > 0:
            logs = [math.log(v) for v in xs]
            half = t * statistics.stdev(logs) / math.sqrt(len(xs))
            return math.expm1(min(half, 700.0))
        mean = statistics.fmean(xs)
        if mean == 0:
            return None
        return abs(t * statistics.stdev(xs) / math.sqrt(len(xs)) / mean)
    except (OverflowError, ValueError):
        return None


def outliers(values: Sequence[float], factor: float = 3.0) -> list[int]:
    """Indexes of repetitions far from the others: more than ``factor`` median absolute
    deviations from the median (none with fewer than 4 values, or no spread)."""
    if len(values) < 4:
        return []
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values)
    if mad == 0:
        return []
    return [i for i, v in enumerate(values) if abs(v - centre) / mad > factor]
