"""Number formatting shared by every report format."""

from __future__ import annotations

from collections.abc import Callable

from kvmlab.errors import printable
from kvmlab.report.table import Cell


def shown(text: str) -> str:
    """``text`` with control characters escaped (``\\x1b``) as :func:`printable` does,
    line breaks kept: a name from the results database never reaches a terminal, a page
    or a table as a control sequence (a report printed to a terminal, an SVG that would
    not be well-formed XML)."""
    if text.replace("\n", "").isprintable():
        return text
    return "\n".join(printable(line) for line in text.split("\n"))


def number(value: float) -> str:
    """Three significant digits, no exponent for everyday magnitudes (1234 -> 1234, 0.0123)."""
    if value == 0:
        return "0"
    if abs(value) < 0.001:
        return "<0.001" if value > 0 else ">-0.001"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def median_spread(cell: Cell) -> str:
    """``1234 ±2%`` (spread: (max-min)/median over the repetitions)."""
    s = cell.summary
    spread = f" ±{s.spread_pct / 2:.0f}%" if s.n > 1 else ""
    return f"{number(s.median)}{spread}"


def change(cell: Cell) -> str:
    """``-23.4%`` or empty at the bottom level."""
    if cell.change_pct is None:
        return ""
    return f"{cell.change_pct:+.1f}%"


def cell_text(cell: Cell | None, show_change: Callable[[str, Cell], str]) -> str:
    """``-`` for a missing value, else the median ± spread and, styled, the change."""
    if cell is None:
        return "-"
    delta = change(cell)
    return median_spread(cell) + (show_change(delta, cell) if delta else "")
