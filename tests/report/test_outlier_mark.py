"""A repetition far from the others is marked in every table (and kept: the median and the
store still have it); the legend says what the mark means."""

from __future__ import annotations

from dataclasses import replace

from kvmlab.report.fmt import LEGEND, median_spread
from kvmlab.report.table import Cell
from tests.report.data import PLACES, summary


def test_a_far_repetition_is_marked_and_explained() -> None:
    base = summary("default", PLACES[1], "cpu", "events", "events/s", True, 100.0, n=5)
    calm = Cell(base, None)
    wild = Cell(replace(base, values=(100.0, 101.0, 99.0, 100.0, 150.0), maximum=150.0), None)
    assert not median_spread(calm).endswith("*")
    assert median_spread(wild).endswith("*")
    assert "* = a repetition more than 3 median absolute deviations" in LEGEND
