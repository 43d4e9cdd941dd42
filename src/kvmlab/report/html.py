"""The report as one self-contained HTML file: runs and host facts, level tables, charts.

No scripts, fonts or anything fetched: CSS and SVG are inline. Every piece of text goes
through :func:`h` (HTML, escaped, control characters shown as ``\\x1b``) or
:mod:`xml.etree` (SVG, see :mod:`kvmlab.report.svg`), and the page is well-formed XML as
well as HTML. The output is a pure function of the inputs (no clock), so it can be
compared against a golden file.

Size: linear in the level table's cells (at most :data:`kvmlab.report.table.MAX_CELLS`).
The charts draw a bar per cell up to :data:`MAX_BARS` in all; a run with more is shown
by its tables alone, and the page says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from html import escape
from typing import Any
from xml.etree.ElementTree import Element

from kvmlab import __version__
from kvmlab.report import svg
from kvmlab.report.configurations import ConfigurationTable, cell_value, ratio_text
from kvmlab.report.fmt import LEGEND, change, median_spread, number, shown
from kvmlab.report.table import FAILED, INTERRUPTED, Column, LevelTable, Row
from kvmlab.results.model import LEVELS, MIGRATION_PREFIX, Run, Summary

TITLE = "kvmlab benchmark report"
MAX_BARS = 5000
"""The most bars (cells of the level table) the charts of one page draw."""
HOST_KEYS = ("cpu", "cpus", "memory_gib", "kernel", "kvm_flavour", "qemu", "accelerator")
"""Host facts shown first, in this order; any other keys follow alphabetically."""
HOST_LABELS = {"cpus": "CPUs", "memory_gib": "memory (GiB)", "kvm_flavour": "KVM flavour"}
BOOT = "boot"
STAGE_ORDER = ("qemu", "firmware", "bios", "kernel", "initrd", "init", "agent")
CHANGE = {
    True: ("loss", "worse than the level below: significant, past the noise"),
    False: ("gain", "better than the level below: significant, past the noise"),
    None: ("", "no change called: not significant, or within the noise"),
}

CSS = """
:root { color-scheme: light; }
body { margin: 0; background: #f6f8fa; color: #1f2328; font: 14px/1.5 system-ui,
  -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif; }
.page { max-width: 1180px; margin: 0 auto; padding: 24px 28px 40px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 32px 0 8px; }
h3 { font-size: 16px; margin: 0 0 8px; }
.lead, .note, figcaption { color: #57606a; }
.card { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 16px 20px;
  margin: 16px 0; }
.run { display: grid; grid-template-columns: minmax(0, 2fr) minmax(0, 3fr); gap: 8px 32px; }
dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 2px 16px; margin: 0; }
dt { color: #57606a; }
dd { margin: 0; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px;
  font-weight: 600; background: #dafbe1; color: #116329; }
.badge.incomplete { background: #ffebe9; color: #a40e26; }
.failure { border-color: #ff8182; background: #fff8f8; }
.failure h3 { color: #a40e26; }
.failure pre { margin: 6px 0 0; white-space: pre-wrap; overflow-wrap: anywhere;
  font-size: 12px; color: #57606a; }
th.failed { color: #a40e26; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 10px; border-bottom: 1px solid #d8dee4; text-align: left;
  vertical-align: top; }
thead th { background: #f6f8fa; font-weight: 600; }
th.num, td.num { text-align: right; white-space: nowrap; }
th.variant { text-align: center; }
.first { border-left: 2px solid #d0d7de; }
td.workload { font-weight: 600; }
tbody tr.group-start > * { border-top: 2px solid #d0d7de; }
.loss { color: #b42318; font-weight: 600; }
.gain { color: #067647; font-weight: 600; }
.change { display: block; font-size: 12px; }
figure { margin: 0; }
figcaption { font-size: 13px; margin-top: 10px; }
svg { display: block; width: 100%; height: auto; }
svg text { font-family: inherit; }
"""


class Markup(str):
    """A string that is already HTML (escaped); :func:`h` inserts it as is."""


META = Markup('<meta charset="utf-8"/><meta name="viewport" content="width=device-width"/>')


def h(tag: str, *children: str, **attrs: object) -> Markup:
    """``<tag attrs>children</tag>``: plain strings and attribute values are escaped.

    ``class_`` becomes ``class``, ``aria_label`` becomes ``aria-label``; None is left out.
    """
    parts = [tag]
    for key, value in attrs.items():
        if value is not None:
            parts.append(f'{key.rstrip("_").replace("_", "-")}="{escape(shown(str(value)))}"')
    body = "".join(c if isinstance(c, Markup) else escape(shown(c)) for c in children)
    return Markup(f"<{' '.join(parts)}>{body}</{tag}>")


def join(parts: Iterable[str]) -> Markup:
    """Concatenate, escaping whatever is not already :class:`Markup`."""
    return Markup("".join(p if isinstance(p, Markup) else escape(shown(p)) for p in parts))


def report_html(
    runs: list[Run],
    tables: list[tuple[int, LevelTable]],
    boot: list[Summary] | None = None,
    title: str = TITLE,
    extra: Sequence[Markup] = (),
) -> str:
    """The whole report: a header per run, then per run its table and a chart per workload.

    Boot stages come from ``boot`` when given (one section at the end), else from each
    table's ``boot`` rows. ``extra`` sections (a run's live migrations) come last; the
    level table's ``migrate ...`` rows get no figure of their own, those sections plot them.
    """
    ids = (f"fig-{i}" for i in itertools.count(1))
    by_id = {r.id: r for r in runs}
    bars = sum(len(r.cells) for _, t in tables for r in t.rows) + len(boot or ())
    charts = bars <= MAX_BARS
    sections = [
        _run_section(run_id, by_id.get(run_id), table, ids, boot is None, charts)
        for run_id, table in tables
    ]
    if not charts:
        sections.append(
            h(
                "p",
                f"No charts: the tables hold {bars} values, more than the {MAX_BARS} "
                "the charts of one page draw.",
                class_="note",
                id="no-charts",
            )
        )
    if boot and charts:
        sections.append(h("section", h("h2", "Boot"), _boot_figure(boot, next(ids))))
    sections.extend(extra)
    if not tables and not boot:
        sections.append(h("p", "No results to report.", class_="note"))
    runs_line = ", ".join(f"run {r.id}" for r in runs) or "no runs"
    header = h(
        "header",
        h("h1", title),
        h("p", f"{runs_line} · generated by kvmlab {__version__}", class_="lead"),
        *(_run_card(r) for r in runs),
    )
    head = join([META, h("title", title), h("style", Markup(CSS))])
    page = h("div", header, h("main", *sections), class_="page")
    return "<!DOCTYPE html>\n" + h("html", h("head", head), h("body", page), lang="en") + "\n"


# -- header --------------------------------------------------------------------------------


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _dl(items: Iterable[tuple[str, str]]) -> Markup:
    return h("dl", *(join([h("dt", k), h("dd", v)]) for k, v in items))


def _run_card(run: Run) -> Markup:
    state = "complete" if run.complete else "incomplete"
    status = h("span", state, class_=f"badge {state}")
    facts = [("lab", run.lab), ("lab file", run.lab_file), ("suite", run.suite)]
    facts.append(("started", _when(run.started)))
    if run.ended is not None:
        facts += [("ended", _when(run.ended)), ("took", f"{run.ended - run.started:.0f} s")]
    facts += [("kvmlab", run.kvmlab_version), ("spec digest", run.spec_digest[:16])]
    facts += [("interrupted" if f.interrupted else "failed", f.headline) for f in run.failures]
    host = _dl(_host_facts(run.host)) if run.host else h("p", "not recorded", class_="note")
    return h(
        "section",
        h("div", h("h3", f"Run {run.id} ", status), _dl(facts)),
        h("div", h("h3", "Host"), host),
        class_="card run",
        id=f"run-{run.id}-facts",
    )


def _host_facts(host: dict[str, Any]) -> Iterator[tuple[str, str]]:
    first = [k for k in HOST_KEYS if k in host]
    for key in first + sorted(k for k in host if k not in first):
        yield HOST_LABELS.get(key, key.replace("_", " ")), _fact(host[key])


def _fact(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_fact(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_fact(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "–" if value is None else str(value)


# -- one run -------------------------------------------------------------------------------


def _run_section(
    run_id: int,
    run: Run | None,
    table: LevelTable,
    ids: Iterator[str],
    boot_from_table: bool,
    charts: bool = True,
) -> Markup:
    name = f"Run {run_id}" + (f": {run.lab} · {run.suite}" if run else "")
    parts: list[str] = [h("h2", name)]
    if table.failures:
        parts.append(_failures(table))
    parts.append(h("div", _level_table(table), class_="card scroll"))
    if not charts:
        return h("section", *parts, id=f"run-{run_id}")
    by_workload: dict[str, list[Row]] = {}
    for row in table.rows:
        by_workload.setdefault(row.workload, []).append(row)
    for workload, rows in by_workload.items():
        if workload == BOOT:
            stages = [c.summary for r in rows for c in r.cells.values()]
            if boot_from_table and stages:
                parts.append(_boot_figure(stages, next(ids)))
            continue
        if workload.startswith(MIGRATION_PREFIX):
            continue
        parts.append(_workload_figure(table, workload, rows, next(ids)))
    return h("section", *parts, id=f"run-{run_id}")


def _failures(table: LevelTable) -> Markup:
    """What cut the run short: each failure's place and error, then the error's other lines."""
    items = []
    for f in table.failures:
        detail = h("pre", f.detail) if f.detail else ""
        items.append(h("li", h("strong", f"{f.short}: "), f.message, detail))
    note = (
        "The run is incomplete: the table holds what was measured before, and a guest "
        "that failed before anything was measured has an empty column."
    )
    return h(
        "section",
        h("h3", "Incomplete run"),
        h("ul", *items),
        h("p", note, class_="note"),
        class_="card failure",
    )


def _cut_short(table: LevelTable, col: Column) -> bool:
    return col.accel in (FAILED, INTERRUPTED) or table.failed(col) is not None


def _column_name(col: Column, several: bool) -> str:
    return f"{col.variant} · {col.label}" if several else col.label


def _num(first: bool) -> str:
    return "num first" if first else "num"


def _describe(col: Column, summary: Summary, delta: str = "") -> str:
    """Hover text: where, median, range, repetitions, change, command."""
    s = summary
    text = (
        f"{_column_name(col, True)}\n{s.metric}: median {number(s.median)} {s.unit} "
        f"(min {number(s.minimum)}, max {number(s.maximum)}, n={s.n})"
    )
    return (
        text
        + (f"\nchange vs level below: {delta}" if delta else "")
        + (f"\n{s.command}" if s.command else "")
    )


def _level_table(table: LevelTable) -> Markup:
    """The Markdown table's content; a header row of variants when there are several."""
    columns = table.columns
    several = len(table.variants) > 1
    firsts = {
        c
        for i, c in enumerate(columns)
        if several and (i == 0 or columns[i - 1].variant != c.variant)
    }
    head = (
        [
            h(
                "tr",
                h("th", "", colspan=3),
                *(
                    h(
                        "th",
                        v,
                        colspan=sum(c.variant == v for c in columns),
                        class_="variant first",
                        scope="colgroup",
                    )
                    for v in table.variants
                ),
            )
        ]
        if several
        else []
    )
    labels = (
        h(
            "th",
            table.heading(c),
            scope="col",
            class_=_num(c in firsts) + (" failed" if _cut_short(table, c) else ""),
        )
        for c in columns
    )
    head.append(h("tr", h("th", "workload"), h("th", "metric"), h("th", "unit"), *labels))
    body = []
    spans: dict[int, int] = {}  # the first row of each run of one workload: its length
    start = 0
    for i, row in enumerate(table.rows):
        if i and table.rows[i - 1].workload != row.workload:
            start = i
        spans[start] = spans.get(start, 0) + 1
    for i, row in enumerate(table.rows):
        better = "higher is better" if row.higher_is_better else "lower is better"
        arrow = h("span", "↑" if row.higher_is_better else "↓", title=better, aria_label=better)
        new = i in spans
        span = spans.get(i, 0)
        cells = [h("td", row.workload, class_="workload", rowspan=span)] if new else []
        cells += [h("td", row.metric), h("td", f"{row.unit} ", arrow)]
        for col in columns:
            cell = row.cells.get(col)
            if cell is None:
                cells.append(h("td", "–", class_=_num(col in firsts)))
                continue
            delta = change(cell)
            kind, meaning = CHANGE[cell.worse]
            note = h("span", delta, class_=f"change {kind}".strip(), title=meaning) if delta else ""
            hover = _describe(col, cell.summary, delta)
            cells.append(
                h("td", median_spread(cell), note, class_=_num(col in firsts), title=hover)
            )
        body.append(h("tr", *cells, class_="group-start" if new else None))
    caption = (
        "Median over the repetitions ±half the min-max spread; below it the "
        f"{LEGEND}. Red: worse, green: better; uncoloured: not called."
    )
    table_html = h("table", h("thead", *head), h("tbody", *body), class_="levels")
    notes = [h("p", f"{line}.", class_="note left-out") for line in table.value_notes]
    return join([table_html, h("p", caption, class_="note"), *notes])


# -- figures -------------------------------------------------------------------------------


def _colors(columns: Sequence[Column]) -> dict[Column, str]:
    """A hue per variant, darker to lighter from L0 up."""
    variants: dict[str, int] = {}
    seen: dict[str, int] = {}
    out: dict[Column, str] = {}
    for col in columns:
        vi = variants.setdefault(col.variant, len(variants))
        pos = seen.get(col.variant, 0)
        seen[col.variant] = pos + 1
        out[col] = svg.series_color(vi, pos)
    return out


def _shorts(columns: Sequence[Column]) -> dict[Column, str]:
    """Per column ``L1``, or ``L2 l2b`` when the variant has several guests at that level."""
    count: dict[tuple[str, str], int] = {}
    for c in columns:
        count[(c.variant, c.level)] = count.get((c.variant, c.level), 0) + 1
    return {
        c: c.level
        if count[(c.variant, c.level)] == 1
        else f"{c.level} {c.guest.rpartition('/')[2]}"
        for c in columns
    }


def _configs(columns: Sequence[Column]) -> str:
    by_variant: dict[str, list[str]] = {}
    for c in columns:
        by_variant.setdefault(c.variant, []).append(c.label)
    return "; ".join(f"{v}: {', '.join(labels)}" for v, labels in by_variant.items())


def _repetitions(summaries: Iterable[Summary]) -> str:
    counts = sorted({s.n for s in summaries}) or [0]
    return f"n = {counts[0]}" if len(counts) == 1 else f"n = {counts[0]}–{counts[-1]}"


def _figure(heading: str, chart: Element, caption: str, ident: str) -> Markup:
    body = Markup(svg.to_string(chart))
    return h("figure", h("h3", heading), body, h("figcaption", caption), class_="card", id=ident)


def _workload_figure(table: LevelTable, workload: str, rows: list[Row], ident: str) -> Markup:
    """A panel per metric, a bar per column with its min-max whisker and change."""
    present = {c for r in rows for c in r.cells}
    columns = [c for c in table.columns if c in present]
    colors = _colors(table.columns)
    shorts = _shorts(columns)
    groups = []
    for row in rows:
        bars = []
        for col, cell in row.cells.items():  # in column order
            s = cell.summary
            note = "" if cell.change_pct is None else f"{cell.change_pct:+.0f}%"
            tint = {True: svg.LOSS, False: svg.GAIN, None: svg.MUTED}[cell.worse]
            tooltip = _describe(col, s, change(cell))
            bars.append(
                svg.Bar(
                    label=shorts[col],
                    color=colors[col],
                    value=s.median,
                    low=s.minimum,
                    high=s.maximum,
                    tooltip=tooltip,
                    note=note,
                    note_color=tint,
                    group=col.variant,
                )
            )
        groups.append(svg.BarGroup(row.metric, row.unit, row.higher_is_better, bars))
    legend = [(colors[c], _column_name(c, len(table.variants) > 1)) for c in columns]
    chart = svg.grouped_bars(groups, legend, f"{workload}: median per metric and level", ident)
    units = ", ".join(dict.fromkeys(f"{r.metric} in {r.unit}" for r in rows))
    summaries = [c.summary for r in rows for c in r.cells.values()]
    caption = (
        f"{workload}: median per metric ({units}) at each level; whiskers from min to "
        f"max over the repetitions ({_repetitions(summaries)}); above each bar the "
        f"change against the level below. Configurations: {_configs(columns)}."
    )
    return _figure(workload, chart, caption, ident)


def _stage_key(metric: str) -> int:
    name = metric.lower()
    return STAGE_ORDER.index(name) if name in STAGE_ORDER else len(STAGE_ORDER)


def _boot_figure(summaries: list[Summary], ident: str) -> Markup:
    """Stacked stages per (variant, guest), the ``total`` metric marked with its spread."""
    guests: dict[Column, dict[str, Summary]] = {}
    for s in summaries:  # stored runs name them qemu_s ... total_s
        s = replace(s, metric=s.metric.removesuffix("_s"))
        guests.setdefault(Column(s.variant, s.guest, s.level, s.accel), {})[s.metric] = s
    variants = {v: i for i, v in enumerate(dict.fromkeys(c.variant for c in guests))}
    order = sorted(
        guests, key=lambda c: (variants[c.variant], c.level not in LEVELS, c.level, c.guest)
    )
    names = dict.fromkeys(m for found in guests.values() for m in found if m != "total")
    stages = sorted(names, key=_stage_key)
    stage_rank = {name: i for i, name in enumerate(stages)}
    colors = {name: svg.STAGES[i % len(svg.STAGES)] for i, name in enumerate(stages)}
    rows = []
    for col in order:
        found = guests[col]
        parts = sorted(
            (s for m, s in found.items() if m != "total"), key=lambda s: stage_rank[s.metric]
        )
        segments = [
            svg.Segment(s.metric, s.median, colors[s.metric], _describe(col, s)) for s in parts
        ]
        total = found.get("total")
        span = None if total is None else (total.median, total.minimum, total.maximum)
        if not segments and total is not None:
            segments = [svg.Segment("total", total.median, svg.STAGES[0], _describe(col, total))]
        label = _column_name(col, len(variants) > 1)
        rows.append(
            svg.StackedRow(label, segments, span, _describe(col, total) if total else label)
        )
    legend = [(colors[m], m) for m in stages]
    if any(r.total for r in rows):
        legend.append((svg.INK, "total (median, min-max)"))
    unit = summaries[0].unit
    chart = svg.stacked_bars(rows, legend, unit, "Boot stages per guest", ident)
    caption = (
        f"Boot stages per guest in {unit}, medians stacked in order "
        f"({', '.join(stages) or 'total only'}); the black mark is the measured total "
        f"with its min-max whisker ({_repetitions(summaries)}). Configurations: "
        f"{_configs(order)}."
    )
    return _figure("boot stages per guest", chart, caption, ident)


def configurations_section(configs: ConfigurationTable, title: str, anchor: str) -> Markup:
    """The by-configuration tables (see :func:`kvmlab.report.text.print_configurations`)."""
    last = configs.levels[-1]
    parts: list[str] = [h("h2", title)]
    for headline in configs.headlines:
        head = h(
            "tr",
            h("th", "configuration"),
            *(h("th", level, class_="num") for level in configs.levels),
            h("th", f"{last} vs default", class_="num"),
            h("th", "KVM under its guests (read back), or why it did not run"),
        )
        body = []
        for row in configs.rows:
            body.append(
                h(
                    "tr",
                    h("td", row.variant),
                    *(
                        h("td", cell_value(row.values.get((headline, lv))), class_="num")
                        for lv in configs.levels
                    ),
                    h("td", ratio_text(configs.ratio(row, headline)), class_="num"),
                    h("td", row.how),
                )
            )
        parts.append(h("h3", headline.label))
        parts.append(
            h("div", h("table", h("thead", head), h("tbody", *body)), class_="card scroll")
        )
    parts += [h("p", note, class_="note") for note in configs.notes]
    return h("section", *parts, id=anchor)
