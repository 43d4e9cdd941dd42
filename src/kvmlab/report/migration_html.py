"""The HTML page of a migration comparison: one bar panel per metric, then RAM remaining and
throughput over time per strategy (the first verified run of each), from the JSON document
``kvmlab migrate LAB -o json`` prints (so this module needs nothing from kvmlab.migrate).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from kvmlab.report.fmt import shown
from kvmlab.report.html import CSS, META, Markup, h, join
from kvmlab.report.svg import (
    FONT,
    GRID,
    INK,
    MUTED,
    Bar,
    BarGroup,
    grouped_bars,
    series_color,
    tick_label,
    ticks,
    to_string,
)

TITLE = "kvmlab migration comparison"
PALETTE = tuple(series_color(i, p) for p in (1, 0) for i in range(4))
"""Eight distinct colours: each hue's middle shade, then its darkest."""
CHART_W, CHART_H, LEFT, TOP = 1120.0, 260.0, 70.0, 36.0


def migration_html(doc: dict[str, Any], lab: str) -> str:
    """The whole page for a comparison document."""
    body = h(
        "div",
        h(
            "header",
            h("h1", f"{TITLE}: {lab}"),
            h("p", "Only verified runs enter the medians; every run is listed.", class_="lead"),
        ),
        h("main", *comparison_parts(doc, lab, "fig")),
        class_="page",
    )
    head = join([META, h("title", f"{TITLE}: {lab}"), h("style", Markup(CSS))])
    return "<!DOCTYPE html>\n" + h("html", h("head", head), h("body", body), lang="en") + "\n"


def comparison_section(doc: dict[str, Any], heading: str, ident: str) -> Markup:
    """The comparison as a section of another page (``kvmlab report``'s), ids prefixed."""
    lead = h("p", "Only verified runs enter the medians; every run is listed.", class_="note")
    return h("section", h("h2", heading), lead, *comparison_parts(doc, heading, ident), id=ident)


def comparison_parts(doc: dict[str, Any], lab: str, ident: str) -> list[Markup]:
    """The runs table, a bar panel per metric, then RAM remaining and throughput over time."""
    strategies = doc["strategies"]
    colors = {s["name"]: PALETTE[i % len(PALETTE)] for i, s in enumerate(strategies)}
    label = {s["name"]: str(i + 1) for i, s in enumerate(strategies)}
    groups = []
    for metric in (
        "total time",
        "QEMU downtime",
        "guest downtime",
        "network downtime",
        "packet-path downtime",
        "transferred",
    ):
        bars = []
        unit = ""
        for s in strategies:
            got = s["summary"].get(metric)
            if got is None:
                continue
            unit = got["unit"]
            tip = (
                f"{s['name']}: {metric} median {got['median']:.0f} {unit} "
                f"(min {got['min']:.0f}, max {got['max']:.0f}, n={got['n']} verified)"
            )
            bars.append(
                Bar(label[s["name"]], colors[s["name"]], got["median"], got["min"], got["max"], tip)
            )
        if not bars and metric == "packet-path downtime":
            continue  # only labs whose guests sit on a switch port have one
        groups.append(BarGroup(metric, unit, False, bars))
    legend = [
        (
            colors[s["name"]],
            f"{label[s['name']]} {s['name']} ({s['spec']['mode']}): "
            f"{s['verified']}/{s['runs']} verified",
        )
        for s in strategies
    ]
    figures = [to_string(grouped_bars(groups, legend, f"{lab}: medians, min-max", f"{ident}-1"))]
    for i, (field, unit, scale, title) in enumerate(
        (
            ("remaining", "MiB", 1 / 1048576, "RAM remaining"),
            ("mbps", "Mbit/s", 1.0, "throughput"),
        )
    ):
        series = []
        for s in strategies:
            run = next((o for o in s["outcomes"] if o["verdict"] == "VERIFIED"), None)
            if run is None:
                continue
            points = [
                (p["t"], p["ram"][field] * scale) for p in run["samples"] if field in p["ram"]
            ]
            series.append((s["name"], colors[s["name"]], points))
        figures.append(line_chart(series, f"{title} over time ({unit})", unit, f"{ident}-{i + 2}"))
    rows = [h("tr", *(h("th", c) for c in ("strategy", "verified", "runs, in order")))]
    for s in strategies:
        verdicts = ", ".join(o["verdict"] for o in s["outcomes"])
        rows.append(
            h(
                "tr",
                h("td", f"{s['name']} ({s['spec']['mode']})"),
                h("td", f"{s['verified']}/{s['runs']}"),
                h("td", verdicts),
            )
        )
    return [h("table", *rows), *(h("figure", Markup(f)) for f in figures)]


def line_chart(
    series: Sequence[tuple[str, str, Sequence[tuple[float, float]]]],
    title: str,
    unit: str,
    ident: str,
) -> str:
    """Lines over time (s) on one axis from 0, with a legend: an inline SVG string."""
    svg = ET.Element(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "role": "img",
            "viewBox": f"0 0 {CHART_W:.0f} {CHART_H + TOP + 40:.0f}",
            "font-size": str(FONT),
            "fill": INK,
        },
    )
    ET.SubElement(svg, "title").text = shown(title)
    ET.SubElement(svg, "text", {"x": "0", "y": "16", "font-weight": "600"}).text = shown(title)
    xs = [x for _, _, pts in series for x, _ in pts] or [1.0]
    ys = [y for _, _, pts in series for _, y in pts] or [1.0]
    x_ticks, y_ticks = ticks(0, max(xs)), ticks(0, max(ys))
    x_max, y_max = max(x_ticks[-1], 1e-9), max(y_ticks[-1], 1e-9)
    plot_w = CHART_W - LEFT - 20

    def px(x: float) -> float:
        return LEFT + x / x_max * plot_w

    def py(y: float) -> float:
        return TOP + CHART_H - y / y_max * CHART_H

    for y in y_ticks:
        ET.SubElement(
            svg,
            "line",
            {
                "x1": f"{LEFT}",
                "x2": f"{LEFT + plot_w}",
                "y1": f"{py(y):.1f}",
                "y2": f"{py(y):.1f}",
                "stroke": GRID,
            },
        )
        ET.SubElement(
            svg,
            "text",
            {"x": f"{LEFT - 6}", "y": f"{py(y) + 4:.1f}", "text-anchor": "end", "fill": MUTED},
        ).text = tick_label(y)
    for x in x_ticks:
        ET.SubElement(
            svg,
            "text",
            {
                "x": f"{px(x):.1f}",
                "y": f"{TOP + CHART_H + 16:.1f}",
                "text-anchor": "middle",
                "fill": MUTED,
            },
        ).text = f"{tick_label(x)} s"
    for n, (name, color, pts) in enumerate(series):
        if pts:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            ET.SubElement(
                svg,
                "polyline",
                {"points": path, "fill": "none", "stroke": color, "stroke-width": "2"},
            )
        lx = LEFT + n * 200
        ET.SubElement(
            svg,
            "rect",
            {
                "x": f"{lx}",
                "y": f"{TOP + CHART_H + 26}",
                "width": "12",
                "height": "12",
                "fill": color,
            },
        )
        ET.SubElement(svg, "text", {"x": f"{lx + 18}", "y": f"{TOP + CHART_H + 36}"}).text = shown(
            name
        )
    ET.SubElement(svg, "text", {"x": "4", "y": f"{TOP - 8}", "fill": MUTED}).text = shown(unit)
    return ET.tostring(svg, encoding="unicode")
