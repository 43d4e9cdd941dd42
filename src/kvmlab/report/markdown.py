"""The level table as Markdown (for issues, wikis, papers)."""

from __future__ import annotations

from kvmlab.report.fmt import cell_text
from kvmlab.report.table import LevelTable


def markdown_table(table: LevelTable, title: str) -> str:
    """A Markdown section: a heading, the table, how to read it, and what failed."""
    several = len(table.variants) > 1
    heads = [
        f"{c.variant} {table.heading(c)}" if several else table.heading(c) for c in table.columns
    ]
    lines = [
        f"## {title}",
        "",
        "| workload | metric | unit | " + " | ".join(heads) + " |",
        "|---|---|---|" + "---:|" * len(heads),
    ]
    for row in table.rows:
        cells = [cell_text(row.cells.get(c), lambda d, _: f" ({d})") for c in table.columns]
        unit = f"{row.unit} ({'higher' if row.higher_is_better else 'lower'} is better)"
        lines.append(f"| {row.workload} | {row.metric} | {unit} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Median over the repetitions, ±half the min-max spread; in parentheses the change "
        "against the level below (L1 against L0, L2 against its L1).",
        "",
    ]
    if table.notes:
        lines += ["**Incomplete:**", "", *(f"- {_escape(n)}" for n in table.notes), ""]
    return "\n".join(lines)


def _escape(text: str) -> str:
    """Keep an error message from being read as Markdown (or HTML)."""
    for char in "\\`*_[]<>|":
        text = text.replace(char, "\\" + char)
    return text
