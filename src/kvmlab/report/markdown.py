"""The level table as Markdown (for issues, wikis, papers).

Every name from the results database goes through :func:`cell` (table cells, headings) or
:func:`_escape` (notes): control characters are escaped (``\\x1b``: nothing reaches a
terminal as an escape sequence, nothing breaks a line), and what Markdown would read as
table syntax, emphasis, code, links or HTML (``|``, ``*``, `````, ``[``, ``<``, ...) is
backslash-escaped, so a name shows as itself and a ``<script>`` stays text."""

from __future__ import annotations

from kvmlab.errors import printable
from kvmlab.report.configurations import ConfigurationTable, cell_value, ratio_text
from kvmlab.report.fmt import LEGEND, cell_text
from kvmlab.report.table import LevelTable


def markdown_table(table: LevelTable, title: str) -> str:
    """A Markdown section: a heading, the table, how to read it, and what failed."""
    several = len(table.variants) > 1
    heads = [
        cell(f"{c.variant} {table.heading(c)}" if several else table.heading(c))
        for c in table.columns
    ]
    lines = [
        f"## {cell(title)}",
        "",
        "| workload | metric | unit | " + " | ".join(heads) + " |",
        "|---|---|---|" + "---:|" * len(heads),
    ]
    for row in table.rows:
        cells = [cell_text(row.cells.get(c), lambda d, _: f" ({d})") for c in table.columns]
        unit = f"{cell(row.unit)} ({'higher' if row.higher_is_better else 'lower'} is better)"
        lines.append(
            f"| {cell(row.workload)} | {cell(row.metric)} | {unit} | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        "Median over the repetitions, ±half the min-max spread; in parentheses the "
        f"{_escape(LEGEND)}.",
        "",
        *(f"Note: {_escape(line)}.\n" for line in table.value_notes),
    ]
    if table.notes:
        lines += ["**Incomplete:**", "", *(f"- {_escape(n)}" for n in table.notes), ""]
    return "\n".join(lines)


def _escape(text: str) -> str:
    """Keep an error message from being read as Markdown (or HTML)."""
    return _backslashed(printable(text), "\\`*_[]<>|")


def cell(text: str) -> str:
    """A name in a table cell or heading: control characters escaped, Markdown's table,
    emphasis, code, link and HTML syntax backslash-escaped (``_`` within a name is left
    alone: Markdown does not read it there)."""
    return _backslashed(printable(text), "\\`*[]<>|")


def _backslashed(text: str, chars: str) -> str:
    if not any(c in text for c in chars):
        return text
    return "".join("\\" + c if c in chars else c for c in text)


def markdown_configurations(configs: ConfigurationTable) -> str:
    """The by-configuration tables (see :func:`kvmlab.report.text.print_configurations`) in
    Markdown."""
    last = configs.levels[-1]
    lines: list[str] = []
    for headline in configs.headlines:
        heads = ["configuration", *configs.levels, f"{last} vs default", "KVM under its guests"]
        lines += [
            f"### By configuration: {_escape(headline.label)}",
            "",
            "| " + " | ".join(heads) + " |",
            "|---|" + "---:|" * (len(configs.levels) + 1) + "---|",
        ]
        for row in configs.rows:
            cells = [cell_value(row.values.get((headline, lv))) for lv in configs.levels]
            ratio = ratio_text(configs.ratio(row, headline))
            lines.append(
                f"| {cell(row.variant)} | " + " | ".join([*cells, ratio, _escape(row.how)]) + " |"
            )
        lines.append("")
    lines += [f"- {_escape(note)}" for note in configs.notes]
    return "\n".join(lines)
