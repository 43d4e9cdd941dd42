"""The level table on the terminal (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kvmlab.report.fmt import cell_text
from kvmlab.report.table import Cell, LevelTable


def print_table(table: LevelTable, console: Console, title: str) -> None:
    """One row per metric; per column the median ± half-spread and the change vs the level below.

    Changes that are losses (less throughput, more time) are red, gains green.
    """
    out = Table(title=title, caption="median ±half the min-max spread; change vs the level below")
    out.add_column("workload")
    out.add_column("metric")
    out.add_column("unit")
    several = len(table.variants) > 1
    for col in table.columns:
        label = f"{col.variant}\n{col.label}" if several else col.label
        out.add_column(label, justify="right")
    for row in table.rows:
        cells = [cell_text(row.cells.get(c), _coloured) for c in table.columns]
        arrow = "↑" if row.higher_is_better else "↓"
        out.add_row(row.workload, row.metric, f"{row.unit} {arrow}", *cells)
    console.print(out)


def _coloured(delta: str, cell: Cell) -> str:
    colour = {True: "red", False: "green", None: "white"}[cell.worse]
    return f" [{colour}]{delta}[/{colour}]"
