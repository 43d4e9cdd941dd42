"""Inline SVG charts for the HTML report, built with :mod:`xml.etree` (so all text is escaped).

Two kinds: grouped vertical bars with min-max error bars, one panel per metric with its own
axis (:func:`grouped_bars`), and stacked horizontal bars (:func:`stacked_bars`). Layout
is computed here in user units; the page scales the SVG through its ``viewBox``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from kvmlab.report.fmt import number, shown

WIDTH = 1120
FONT = 12
CHAR = 0.56 * FONT
"""Average glyph width for the sans-serif stack, used to estimate text widths."""
PANEL_LEFT, PANEL_TOP, PANEL_PAD, PLOT_H = 62.0, 48.0, 28.0, 190.0
"""Bar panels: room for the y axis, for the title, between panels; the plot's height."""
INK, MUTED, GRID = "#1f2328", "#57606a", "#d8dee4"
LOSS, GAIN = "#b42318", "#067647"

HUES = (
    ("#1d4e89", "#3b7dd8", "#8fb8ee", "#c6dbf7"),  # blue
    ("#9a3d00", "#e0702b", "#f4b183", "#fbd9bf"),  # orange
    ("#14633b", "#2e9e5f", "#86cfa3", "#c7ead4"),  # green
    ("#5b2a86", "#8c5cc4", "#c1a5e3", "#e3d6f3"),  # purple
)
STAGES = ("#3b7dd8", "#e0702b", "#2e9e5f", "#8c5cc4", "#c9a227", "#d6457a", "#5f8f9f")


def series_color(variant_index: int, position: int) -> str:
    """One hue per variant, darker to lighter along its columns (L0 darkest)."""
    hue = HUES[variant_index % len(HUES)]
    return hue[position % len(hue)]


@dataclass(frozen=True)
class Bar:
    """One bar: a median with its min-max range, a short axis label and a hover text."""

    label: str
    color: str
    value: float
    low: float
    high: float
    tooltip: str
    note: str = ""
    """Shown above the bar (the change against the level below)."""
    note_color: str = MUTED
    group: str = ""
    """Bars of one group (variant) sit together; several groups are labelled below."""


@dataclass(frozen=True)
class BarGroup:
    """One panel: a metric and its bars, on an axis in ``unit``."""

    title: str
    unit: str
    higher_is_better: bool
    bars: Sequence[Bar]


@dataclass(frozen=True)
class Segment:
    """One stage of a stacked bar."""

    name: str
    value: float
    color: str
    tooltip: str


@dataclass(frozen=True)
class StackedRow:
    """One stacked bar; ``total`` (median, min, max) is marked at its end when known."""

    label: str
    segments: Sequence[Segment]
    total: tuple[float, float, float] | None = None
    tooltip: str = ""


AXIS_LIMIT = 1e300
"""Axes end within this magnitude: a larger (stored, absurd) value is drawn off the axis,
never turned into an infinite scale."""


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^n) covering ``[low, high]``; 0 is always one."""
    low = max(min(low, 0.0), -AXIS_LIMIT) if math.isfinite(low) else -AXIS_LIMIT * (low < 0)
    high = min(max(high, 0.0), AXIS_LIMIT) if math.isfinite(high) else AXIS_LIMIT * (high > 0)
    raw = (high - low) / count
    if not raw > 1e-300:  # nothing to scale (or too little to divide): an axis of 0..1
        low, high, raw = 0.0, 1.0, 1.0 / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def tick_label(value: float) -> str:
    """``0``, ``2.5``, ``40``, ``12k``, ``1.5M``: short enough for an axis."""
    for threshold, div, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if abs(value) >= threshold:
            return f"{value / div:.3g}{suffix}"
    return f"{value:.6g}"


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: object) -> ET.Element:
    el = ET.SubElement(
        parent, tag, {k.rstrip("_").replace("_", "-"): _attr(v) for k, v in attrs.items()}
    )
    if text is not None:
        el.text = shown(text)
    return el


def _attr(value: object) -> str:
    if isinstance(value, float):  # a coordinate; one out of any range is drawn at 0
        return f"{value if math.isfinite(value) else 0.0:.2f}".rstrip("0").rstrip(".")
    return shown(str(value))


def _root(width: float, height: float, title: str, ident: str) -> ET.Element:
    svg = ET.Element(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {width:.0f} {height:.0f}",
            "width": f"{width:.0f}",
            "height": f"{height:.0f}",
            "role": "img",
            "aria-labelledby": f"{ident}-t",
            "font-size": str(FONT),
            "fill": INK,
        },
    )
    _sub(svg, "title", title, id=f"{ident}-t")
    return svg


def _legend(svg: ET.Element, items: Sequence[tuple[str, str]], y: float) -> float:
    """Swatches and labels in rows across the width; returns the y below them."""
    x = 0.0
    for color, label in items:
        width = 18 + len(label) * CHAR + 18
        if x and x + width > WIDTH:
            x, y = 0.0, y + 20
        item = _sub(svg, "g", class_="legend")
        _sub(item, "rect", x=x, y=y, width=12, height=12, rx=2, fill=color)
        _sub(item, "text", label, x=x + 18, y=y + 10.5)
        x += width
    return y + 28


def _errorbar(svg: ET.Element, x: float, y_low: float, y_high: float, horizontal: bool) -> None:
    """A min-max whisker with caps at ``x`` (vertical) or at height ``x`` (horizontal)."""
    g = _sub(svg, "g", class_="errorbar", stroke=INK, stroke_width="1.2")
    if horizontal:
        _sub(g, "line", x1=y_low, x2=y_high, y1=x, y2=x)
        for end in (y_low, y_high):
            _sub(g, "line", x1=end, x2=end, y1=x - 4, y2=x + 4)
    else:
        _sub(g, "line", x1=x, x2=x, y1=y_low, y2=y_high)
        for end in (y_low, y_high):
            _sub(g, "line", x1=x - 4, x2=x + 4, y1=end, y2=end)


def grouped_bars(
    groups: Sequence[BarGroup], legend: Sequence[tuple[str, str]], title: str, ident: str
) -> ET.Element:
    """Panels of equal width (one per group, own y axis from 0 with the unit), wrapped in rows."""
    most = max((len(g.bars) for g in groups), default=1)
    sets = max((len({b.group for b in g.bars}) for g in groups), default=1)
    narrowest = PANEL_LEFT + (most + sets) * 28 + PANEL_PAD
    per_row = max(1, min(len(groups), int(WIDTH // narrowest)))
    width = min(WIDTH / per_row, 560.0)
    labelled = sets > 1
    cell_h = PANEL_TOP + PLOT_H + (46 if labelled else 30)
    legend_end = _legend(ET.Element("g"), legend, 0)
    rows = math.ceil(len(groups) / per_row)
    svg = _root(WIDTH, legend_end + rows * cell_h + (rows - 1) * 16, title, ident)
    _legend(svg, legend, 2)
    for i, group in enumerate(groups):
        row, col = divmod(i, per_row)
        _panel(
            svg, group, col * width, legend_end + row * (cell_h + 16), width - PANEL_PAD, labelled
        )
    return svg


def _panel(
    svg: ET.Element, group: BarGroup, x0: float, y0: float, width: float, labelled: bool
) -> None:
    lows = [min(b.low, b.value) for b in group.bars]
    highs = [max(b.high, b.value) for b in group.bars]
    marks = ticks(min(lows, default=0.0), max(highs, default=1.0) * 1.08)
    lo, hi = marks[0], marks[-1]
    base_y = y0 + PANEL_TOP + PLOT_H

    def sy(v: float) -> float:
        return base_y - (v - lo) / (hi - lo) * PLOT_H

    g = _sub(svg, "g", class_="panel")
    better = "higher is better" if group.higher_is_better else "lower is better"
    _sub(g, "text", group.title, x=x0, y=y0 + 14, font_weight="600", font_size="13")
    _sub(g, "text", f"{group.unit}, {better}", x=x0, y=y0 + 30, fill=MUTED)
    axis_x, end_x = x0 + PANEL_LEFT, x0 + width
    for mark in marks:
        _sub(g, "line", x1=axis_x, x2=end_x, y1=sy(mark), y2=sy(mark), stroke=GRID)
        _sub(
            g,
            "text",
            tick_label(mark),
            x=axis_x - 6,
            y=sy(mark) + 4,
            text_anchor="end",
            fill=MUTED,
            font_size="11",
        )
    mid = y0 + PANEL_TOP + PLOT_H / 2
    _sub(
        g,
        "text",
        group.unit,
        x=x0 + 10,
        y=mid,
        text_anchor="middle",
        fill=MUTED,
        transform=f"rotate(-90 {x0 + 10:.1f} {mid:.1f})",
        class_="axis-label",
    )
    _sub(g, "line", x1=axis_x, x2=end_x, y1=sy(0), y2=sy(0), stroke=MUTED)
    # Slots: one per bar, half a slot between sets (variants).
    starts = []
    groups_so_far: set[str] = set()
    for i, b in enumerate(group.bars):
        groups_so_far.add(b.group)
        starts.append(i + 0.5 * len(groups_so_far) - 0.5)
    slot = (end_x - axis_x) / ((starts[-1] + 1) if starts else 1)
    bar_w = min(slot * 0.72, 56.0)
    sets: dict[str, list[float]] = {}
    for bar, start in zip(group.bars, starts, strict=True):
        centre = axis_x + (start + 0.5) * slot
        top_y, zero_y = sy(max(bar.value, 0.0)), sy(min(bar.value, 0.0))
        rect = _sub(
            g,
            "rect",
            class_="bar",
            x=centre - bar_w / 2,
            y=top_y,
            width=bar_w,
            height=max(zero_y - top_y, 0.5),
            fill=bar.color,
        )
        _sub(rect, "title", bar.tooltip)
        if bar.high > bar.low:
            _errorbar(g, centre, sy(bar.low), sy(bar.high), horizontal=False)
        if bar.note:
            _sub(
                g,
                "text",
                bar.note,
                x=centre,
                y=min(sy(bar.high), top_y) - 5,
                text_anchor="middle",
                font_size="10",
                fill=bar.note_color,
            )
        _sub(g, "text", bar.label, x=centre, y=base_y + 16, text_anchor="middle", font_size="11")
        sets.setdefault(bar.group, []).append(centre)
    if labelled:
        for name, centres in sets.items():
            _sub(
                g,
                "text",
                name,
                x=sum(centres) / len(centres),
                y=base_y + 34,
                text_anchor="middle",
                fill=MUTED,
                font_size="11",
                class_="set-label",
            )


def stacked_bars(
    rows: Sequence[StackedRow], legend: Sequence[tuple[str, str]], unit: str, title: str, ident: str
) -> ET.Element:
    """Horizontal stacked bars, one per row, on a shared axis from 0 in ``unit``."""
    row_h, gap, right, bottom = 22.0, 12.0, 90.0, 44.0
    left = max((len(r.label) for r in rows), default=10) * CHAR + 16
    legend_rows = _legend(ET.Element("g"), legend, 0)
    plot_w = WIDTH - left - right
    ends = [max(sum(s.value for s in r.segments), r.total[2] if r.total else 0.0) for r in rows]
    marks = ticks(0.0, max(ends, default=1.0))
    hi = marks[-1]

    def sx(v: float) -> float:
        return left + v / hi * plot_w

    top = legend_rows + 4
    height = top + len(rows) * (row_h + gap) + bottom
    svg = _root(WIDTH, height, title, ident)
    _legend(svg, legend, 2)
    axis_y = top + len(rows) * (row_h + gap)
    for mark in marks:
        _sub(svg, "line", x1=sx(mark), x2=sx(mark), y1=top - 4, y2=axis_y, stroke=GRID)
        _sub(
            svg,
            "text",
            tick_label(mark),
            x=sx(mark),
            y=axis_y + 16,
            text_anchor="middle",
            fill=MUTED,
            font_size="11",
        )
    _sub(
        svg,
        "text",
        f"{unit} (lower is better)",
        x=left + plot_w / 2,
        y=axis_y + 36,
        text_anchor="middle",
        fill=MUTED,
        class_="axis-label",
    )
    for i, row in enumerate(rows):
        y = top + i * (row_h + gap) + gap / 2
        g = _sub(svg, "g", class_="stack")
        _sub(g, "title", row.tooltip or row.label)
        _sub(g, "text", row.label, x=left - 8, y=y + row_h / 2 + 4, text_anchor="end")
        start = 0.0
        for seg in row.segments:
            rect = _sub(
                g,
                "rect",
                class_="bar",
                x=sx(start),
                y=y,
                height=row_h,
                width=max(sx(start + seg.value) - sx(start), 0.5),
                fill=seg.color,
                stroke="#ffffff",
                stroke_width="1",
            )
            _sub(rect, "title", seg.tooltip)
            start += seg.value
        end = start
        if row.total is not None:
            median, low, high = row.total
            _sub(
                g,
                "line",
                x1=sx(median),
                x2=sx(median),
                y1=y - 3,
                y2=y + row_h + 3,
                stroke=INK,
                stroke_width="2",
                class_="total",
            )
            if high > low:
                _errorbar(g, y + row_h / 2, sx(low), sx(high), horizontal=True)
            end = max(end, high, median)
            label = f"{number(median)} {unit}"
        else:
            label = f"{number(start)} {unit}"
        _sub(g, "text", label, x=sx(end) + 8, y=y + row_h / 2 + 4, font_weight="600")
    return svg


def to_string(svg: ET.Element) -> str:
    """The element as XML text (well-formed, escaped), for inlining into HTML."""
    return ET.tostring(svg, encoding="unicode")
