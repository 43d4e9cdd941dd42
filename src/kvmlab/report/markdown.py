"""The level table as Markdown (for issues, wikis, papers)."""

from __future__ import annotations

from kvmlab.report.configurations import ConfigurationTable, cell_value, ratio_text
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


def markdown_configurations(configs: ConfigurationTable) -> str:
    """Seed 003's tables (see :func:`kvmlab.report.text.print_configurations`) in Markdown."""
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
                f"| {row.variant} | " + " | ".join([*cells, ratio, _escape(row.how)]) + " |"
            )
        lines.append("")
    lines += [f"- {_escape(note)}" for note in configs.notes]
    return "\n".join(lines)
