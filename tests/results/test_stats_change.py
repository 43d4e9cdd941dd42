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
    from kvmlab.report.table import Cell
    from kvmlab.results.model import Sample
    from kvmlab.results.stats import summarize

    def loss(value: float) -> Cell:
        sample = Sample("default", "vm", "L1", "tcg", "pvp", "64B loss", value, "%", False, 0, "c")
        return Cell(summarize([sample])[0], change_pct(value, 0.0005), 0.0005)

    assert loss(40.0).change_pct is None and loss(40.0).worse is True
    assert loss(0.0001).worse is False
