"""Verdicts on synthetic samples with known answers: equal distributions, a known shift,
heavy tails, three repetitions, a change inside the noise, one repetition."""

from __future__ import annotations

import random

import pytest

from kvmlab.results.verdict import (
    NOISE,
    Change,
    Verdict,
    compare,
    noise_for,
    outliers,
    t_quantile,
    thresholds_text,
)


def known(a: list[float], b: list[float], higher_is_better: bool, noise: float = NOISE) -> Change:
    """The change from ``a`` to ``b``, both non-empty (never None)."""
    change = compare(a, b, higher_is_better, noise=noise)
    assert change is not None
    return change


def draws(seed: int, n: int, centre: float, spread: float) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(centre, spread) for _ in range(n)]


@pytest.mark.parametrize("n", [3, 5, 10])
def test_equal_distributions_are_no_significant_change_nearly_always(n: int) -> None:
    """A/A: 400 pairs from one distribution (5 % noise); at 95 % confidence about 5 % may
    be called changed by chance: at most 6 % here, at every size (a bootstrap of medians
    called 12 % at three repetitions, which is why it is not the method)."""
    called = 0
    for seed in range(400):
        change = compare(draws(seed, n, 100, 5), draws(seed + 1000, n, 100, 5), True)
        assert change is not None
        called += change.verdict.called
    assert called <= 24, called


def test_a_lognormal_a_a_is_no_significant_change_nearly_always() -> None:
    rng = random.Random(7)
    called = 0
    for _ in range(400):
        a = [100 * rng.lognormvariate(0, 0.2) for _ in range(3)]
        b = [100 * rng.lognormvariate(0, 0.2) for _ in range(3)]
        called += known(a, b, True).verdict.called
    assert called <= 24, called


def test_t_quantiles_are_the_tables() -> None:
    for df, value in ((2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)):
        assert abs(t_quantile(0.975, df) - value) < 1e-3, df


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_a_clear_shift_is_called_in_its_direction(higher_is_better: bool) -> None:
    a = draws(1, 5, 100, 2)
    b = draws(2, 5, 50, 1)  # halved
    change = compare(a, b, higher_is_better)
    assert change is not None
    assert change.verdict is (Verdict.WORSE if higher_is_better else Verdict.BETTER)
    low, high = change.interval_pct() or (0.0, 0.0)
    assert low <= change.pct <= high and high < -40


def test_three_repetitions_call_a_halving_but_not_an_overlap() -> None:
    assert known([10, 11, 12], [20, 21, 22], True).verdict is Verdict.BETTER
    assert known([10, 11, 12], [11, 12, 13], True).verdict is Verdict.NO_CHANGE
    slowed = [compare(draws(s, 3, 100, 5), draws(s + 9, 3, 50, 2.5), True) for s in range(50)]
    assert all(c is not None and c.verdict is Verdict.WORSE for c in slowed)


def test_heavy_tails_do_not_make_a_verdict_out_of_one_outlier() -> None:
    """The demo's L2 disk: medians 3624 and 3798, one repetition far off: no call."""
    a = [3500.0, 3624.0, 4100.0]
    b = [400.0, 3798.0, 7500.0]
    change = compare(a, b, True)
    assert change is not None and change.verdict is Verdict.NO_CHANGE
    assert round(change.pct, 1) == 4.8


def test_a_tight_change_inside_the_noise_is_within_noise() -> None:
    a = [100.0, 100.1, 100.2, 100.1, 100.0]
    b = [101.0, 101.1, 101.0, 101.2, 101.1]  # +1 %, tight: real, and under 2 %
    change = compare(a, b, True)
    assert change is not None and change.verdict is Verdict.NOISE
    assert known(a, b, True, noise=0.005).verdict is Verdict.BETTER


def test_counts_that_can_be_zero_get_an_interval_too() -> None:
    change = compare([0.0, 10.0, 20.0], [200.0, 210.0, 190.0], True)
    assert change is not None and change.verdict is Verdict.BETTER


def test_one_repetition_or_a_zero_base_has_no_interval() -> None:
    single = compare([100.0], [50.0], True)
    assert single is not None and single.verdict is Verdict.SINGLE and single.interval_pct() is None
    assert compare([0.0, 0.0], [1.0, 2.0], True) is None
    assert compare([], [1.0], True) is None


def test_the_interval_is_the_same_every_time() -> None:
    a, b = draws(5, 6, 10, 1), draws(6, 6, 12, 1)
    assert compare(a, b, True) == compare(a, b, True)


def test_a_repetition_far_from_the_others_is_marked() -> None:
    assert outliers([10.0, 10.2, 9.9, 10.1, 30.0]) == [4]
    assert outliers([10.0, 10.2, 30.0]) == []  # too few to tell
    assert outliers([5.0, 5.0, 5.0, 5.0]) == []


def test_precision_narrows_with_agreeing_repetitions() -> None:
    from kvmlab.results.verdict import precision

    assert precision([100.0]) is None
    assert precision([100.0, 100.0, 100.0]) == 0.0
    tight = precision([99.0, 100.0, 101.0])
    wide = precision([50.0, 100.0, 200.0])
    assert tight is not None and wide is not None
    assert 0.01 < tight < 0.05 < 1.0 < wide  # t(2) = 4.30: three values say little
    assert precision([0.0, 1.0, 2.0]) is not None  # a count that can be 0


def test_a_significant_change_smaller_than_the_noise_is_noise() -> None:
    """The A/A run's host CPU: medians 1.6 % apart, an interval that just excludes no
    change ([-3.6 %, -0.1 %]): within the cpu threshold, not called (it used to be, when
    reaching past the threshold with the interval's end was enough)."""
    a = [6682.0, 6700.0, 6650.0, 6690.0, 6600.0]
    b = [6577.0, 6560.0, 6600.0, 6570.0, 6590.0]
    change = known(a, b, True, 0.02)
    low, high = change.interval_pct() or (0.0, 0.0)
    assert high < 0 and low < -2 and change.pct > -2
    assert change.verdict is Verdict.NOISE


def test_each_workload_has_its_threshold_and_the_rest_the_default() -> None:
    assert noise_for("disk") > noise_for("network") > noise_for("cpu") >= NOISE
    assert noise_for("kbuild") == NOISE  # a workload without one of its own
    assert noise_for("network", "ping_rtt_avg_ms") > noise_for(
        "network", "to_parent_received_gbit_s"
    )
    a, b = [100.0, 101.0, 99.0], [130.0, 131.0, 129.0]  # +30 %, tight
    assert known(a, b, True, noise_for("disk")).verdict is Verdict.NOISE
    assert known(a, b, True, noise_for("cpu")).verdict is Verdict.BETTER
    assert "disk ±40%" in thresholds_text()
