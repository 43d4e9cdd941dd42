"""Number formatting shared by every report format."""

from __future__ import annotations

from collections.abc import Callable

from kvmlab.errors import printable
from kvmlab.report.table import Cell
from kvmlab.results.verdict import METHOD, Verdict, outliers, thresholds_text


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
    """``1234 ±2%`` (spread: (max-min)/median over the repetitions), ``1234 ±9%*`` when a
    repetition lies far from the others (:data:`OUTLIER_NOTE`)."""
    s = cell.summary
    spread = f" ±{s.spread_pct / 2:.0f}%" if s.n > 1 else ""
    mark = "*" if outliers(s.values) else ""
    return f"{number(s.median)}{spread}{mark}"


OUTLIER_NOTE = (
    "* = a repetition more than 3 median absolute deviations from the others (kept in the "
    "store and in the median; -o json lists it under outliers)"
)


WORDS = {
    Verdict.BETTER: "better",
    Verdict.WORSE: "worse",
    Verdict.NO_CHANGE: "n.s.",
    Verdict.NOISE: "noise",
    Verdict.SINGLE: "1 run",
}
"""How a verdict is printed beside its change (the legend, :data:`LEGEND`, spells them out)."""

LEGEND = (
    "change vs the level below (or the other run): median against median, [95% interval], "
    "and the verdict: better or worse, n.s. = no significant change (the interval holds 0%), "
    f"noise = within the workload's noise threshold ({thresholds_text()}), 1 run = no "
    f"interval ({METHOD}); " + OUTLIER_NOTE
)


def change(cell: Cell) -> str:
    """``-23.4% [-31,-15] worse``, or empty at the bottom level."""
    if cell.change_pct is None:
        return ""
    text = f"{cell.change_pct:+.1f}%"
    if cell.change is None:
        return text
    interval = cell.change.interval_pct()
    if interval is not None:
        text += f" {interval_text(*interval)}"
    return f"{text} {WORDS[cell.change.verdict]}"


def interval_text(low: float, high: float) -> str:
    """``[-31,-15]`` (``[-1.2,+0.4]`` for a narrow one)."""
    digits = 0 if high - low >= 10 else 1
    return f"[{low:+.{digits}f},{high:+.{digits}f}]"


def cell_text(cell: Cell | None, show_change: Callable[[str, Cell], str]) -> str:
    """``-`` for a missing value, else the median ± spread and, styled, the change."""
    if cell is None:
        return "-"
    delta = change(cell)
    return median_spread(cell) + (show_change(delta, cell) if delta else "")
