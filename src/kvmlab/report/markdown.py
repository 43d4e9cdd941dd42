"""The level table as Markdown (for issues, wikis, papers)."""

from __future__ import annotations

from kvmlab.report.fmt import cell_text
from kvmlab.report.table import LevelTable


def markdown_table(table: LevelTable, title: str) -> str:
    """A Markdown section: a heading, the table, and how to read it."""
    several = len(table.variants) > 1
    heads = [f"{c.variant} {c.label}" if several else c.label for c in table.columns]
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
    return "\n".join(lines)
