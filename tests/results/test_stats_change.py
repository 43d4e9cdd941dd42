"""The change column: a ratio only against a base the reports can print."""

from __future__ import annotations

import pytest

from kvmlab.results.stats import change_pct


def test_change_against_a_printable_base() -> None:
    assert change_pct(783, 901) == pytest.approx(-13.1, abs=0.1)
    assert change_pct(-2.0, -1.0) == pytest.approx(100.0)


@pytest.mark.parametrize("base", [0.0, 4.4e-7, -0.0005])
def test_no_ratio_against_a_base_too_small_to_print(base: float) -> None:
    assert change_pct(1.49, base) is None


def test_a_loss_against_a_tiny_base_is_still_marked_worse() -> None:
    """Packet loss from 0.0005 % to 40 %: no percentage of a base that small, but the
    verdict still says worse (and from 0.0005 % to 0.0001 %, better)."""
    from kvmlab.report.table import Cell, level_table
    from kvmlab.results.model import Sample
    from kvmlab.results.stats import summarize

    def loss(values: list[float]) -> Cell:
        base = [0.0005, 0.0006, 0.0004]
        samples = [
            Sample("default", guest, level, "tcg", "pvp", "64B loss", v, "%", False, i, "c")
            for guest, level, series in (("host", "L0", base), ("vm", "L1", values))
            for i, v in enumerate(series)
        ]
        table = level_table(summarize(samples))
        return next(c for c in table.rows[0].cells.values() if c.base is not None)

    assert loss([40.0, 41.0, 39.0]).change_pct is None and loss([40.0, 41.0, 39.0]).worse is True
    assert loss([0.0001, 0.00012, 0.00008]).worse is False
