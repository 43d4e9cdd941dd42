"""The level table on the terminal or in a pipe (see :mod:`kvmlab.report.grid`)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from kvmlab.report.configurations import ConfigurationTable, cell_value, ratio_text
from kvmlab.report.fmt import LEGEND, change, median_spread, shown
from kvmlab.report.grid import Cell as GridCell
from kvmlab.report.grid import Col, print_grid
from kvmlab.report.table import Cell, LevelTable

CAPTION = f"median ±half the min-max spread; {LEGEND}"


def print_table(table: LevelTable, console: Console, title: str) -> None:
    """One row per metric; per column the median ± half-spread and the change vs the level below.

    Changes called worse (less throughput, more time, past the noise and significant) are
    red, called better green, the others uncoloured. A run cut short ends with a line per
    failure: where, doing what, and the error.
    """
    several = len(table.variants) > 1
    columns = [Col("workload"), Col("metric"), Col("unit")]
    for col in table.columns:
        label = f"{col.variant}\n{table.heading(col)}" if several else table.heading(col)
        columns.append(Col(label, "right"))
    rows: list[list[GridCell]] = []
    for row in table.rows:
        arrow = "↑" if row.higher_is_better else "↓"
        cells = [_coloured(row.cells.get(c)) for c in table.columns]
        rows.append([row.workload, row.metric, f"{row.unit} {arrow}", *cells])
    print_grid(console, columns, rows, title=title, caption=CAPTION)
    for line in table.value_notes:
        console.print(Text(shown(line)), soft_wrap=True)
    for note in table.notes:
        console.print(Text(shown(note), style="red"), soft_wrap=True)


def _coloured(cell: Cell | None) -> Text:
    """``-``, or the median ± spread and the change in colour (no markup is parsed)."""
    if cell is None:
        return Text("-")
    out = Text(median_spread(cell))
    delta = change(cell)
    if delta:
        out.append(" ")
        out.append(delta, style={True: "red", False: "green", None: "white"}[cell.worse])
    return out


def print_configurations(configs: ConfigurationTable, console: Console) -> None:
    """The by-configuration table per compared metric: a row per configuration, a column
    per level, the deepest level against the lab as written, and the KVM its guests ran
    under (or why this host did not run it)."""
    last = configs.levels[-1]
    for headline in configs.headlines:
        columns = [
            Col("configuration"),
            *(Col(level, "right") for level in configs.levels),
            Col(f"{last} vs default", "right"),
            Col("KVM its guests ran under (read back), or why it did not run"),
        ]
        rows: list[list[GridCell]] = []
        for row in configs.rows:
            cells = [cell_value(row.values.get((headline, lv))) for lv in configs.levels]
            rows.append([row.variant, *cells, ratio_text(configs.ratio(row, headline)), row.how])
        print_grid(console, columns, rows, title=f"by configuration: {headline.label}")
    for note in configs.notes:
        console.print(Text(shown(note), style="red"), soft_wrap=True)
