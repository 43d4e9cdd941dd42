"""The level table of the nested-KVM write-up: a row per metric, a column per level, each
level's change against the level below it; a run cut short also names what failed, where."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kvmlab.errors import KvmlabError
from kvmlab.results.model import LEVELS, Failure, Summary
from kvmlab.results.stats import change_pct
from kvmlab.results.verdict import Change, Verdict, compare, noise_for

MAX_CELLS = 250_000
"""The most cells (rows x columns) a text, Markdown or HTML level table shows. A real run
has a few thousand; a run whose table would be larger is refused (:func:`check_size`)
with the commands that give every value (JSON, the CSV export), which stay linear."""


class TableTooLarge(KvmlabError):
    """A level table too large to print (see :data:`MAX_CELLS`)."""

    exit_code = 3


def check_size(table: LevelTable, what: str, ref: str) -> None:
    """Refuse (:class:`TableTooLarge`) a table of more than :data:`MAX_CELLS` cells."""
    rows, columns = len(table.rows), len(table.columns)
    if rows * columns > MAX_CELLS:
        raise TableTooLarge(
            f"{what}: its level table would have {rows} rows x {columns} columns, more than "
            f"the {MAX_CELLS} cells a report shows; 'kvmlab report {ref} -o json' or "
            f"'kvmlab results export {ref}' give every value"
        )


FAILED = "failed"
INTERRUPTED = "interrupted"
"""Shown instead of the accelerator for a guest cut short before anything was measured."""


@dataclass(frozen=True)
class Column:
    """One measured place: a guest (or the host) of one variant."""

    variant: str
    guest: str
    level: str
    accel: str

    @property
    def label(self) -> str:
        """``L1 l1 (tcg)``; the variant is shown separately when there are several."""
        where = "host" if self.guest == "host" else self.guest
        return f"{self.level} {where} ({self.accel})"

    @property
    def parent_guest(self) -> str | None:
        """The guest one level below: ``l1`` for ``l1/l2``, ``host`` for ``l1``."""
        if self.guest == "host":
            return None
        return self.guest.rpartition("/")[0] or "host"


@dataclass(frozen=True)
class Cell:
    """A median with its spread, and the change against the level below."""

    summary: Summary
    change_pct: float | None
    """(value - value below) / value below, in percent; None at L0 or without a base."""

    base: float | None = None
    """The value below (the change's base), when there is one."""

    change: Change | None = None
    """The change with its interval and verdict (:mod:`kvmlab.results.verdict`)."""

    @property
    def worse(self) -> bool | None:
        """Whether the change is significantly a loss (True) or a gain (False), past the
        noise; None for no change, one within the noise, or none at all: only a change
        that is called is coloured."""
        if self.change is None:
            return None
        return {Verdict.WORSE: True, Verdict.BETTER: False}.get(self.change.verdict)


@dataclass
class Row:
    """One metric across every column."""

    workload: str
    metric: str
    unit: str
    higher_is_better: bool
    cells: dict[Column, Cell] = field(default_factory=dict)


@dataclass
class LevelTable:
    """Columns ordered variant by variant, then by level; rows by workload, then metric."""

    columns: list[Column]
    rows: list[Row]
    failures: list[Failure] = field(default_factory=list)
    """What cut the run short; a failed guest without samples has a column of its own."""
    left_out: dict[int, int] = field(default_factory=dict)
    """Run id -> how many of its stored values were left out as not finite numbers (no
    median or change can use ``inf``); each report says so (:attr:`value_notes`)."""
    _failed_at: tuple[list[Failure], int, dict[tuple[str, str, str], Failure]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """Where each failure happened, indexed once (a report asks once per column)."""

    @property
    def variants(self) -> list[str]:
        """The variants present, in column order."""
        return list(dict.fromkeys(c.variant for c in self.columns))

    def failed(self, col: Column) -> Failure | None:
        """The failure at this column's guest (not its teardown), if one happened there."""
        seen = self._failed_at
        if seen is None or seen[0] is not self.failures or seen[1] != len(self.failures):
            at: dict[tuple[str, str, str], Failure] = {}
            for f in self.failures:
                if f.stage != "teardown":
                    for guest in _guests(f):
                        at.setdefault((f.variant, f.level, guest), f)
            seen = self._failed_at = (self.failures, len(self.failures), at)
        return seen[2].get((col.variant, col.level, col.guest))

    def heading(self, col: Column) -> str:
        """The column's label, ``failed`` (``interrupted``) after it when its guest was cut short
        after something was measured there."""
        failure = self.failed(col)
        if failure is None or col.accel in (FAILED, INTERRUPTED):
            return col.label
        return f"{col.label} {_outcome(failure)}"

    @property
    def notes(self) -> list[str]:
        """One line per failure: where, doing what, the error's first line."""
        return [f.headline for f in self.failures]

    @property
    def value_notes(self) -> list[str]:
        """One line per run of which stored values were left out (see :attr:`left_out`)."""
        return [left_out_note(run, n) for run, n in self.left_out.items() if n]


def left_out_note(run: int, count: int) -> str:
    """``run 7: 3 stored values left out, not finite numbers (inf or -inf)``."""
    values = "value" if count == 1 else "values"
    return f"run {run}: {count} stored {values} left out, not finite numbers (inf or -inf)"


def _outcome(failure: Failure) -> str:
    return INTERRUPTED if failure.interrupted else FAILED


def _guests(failure: Failure) -> list[str]:
    return [g for g in failure.guest.split(", ") if g]


def _level_key(level: str) -> tuple[int, str]:
    """L0, L1, L2 in order; any other level after them."""
    return (LEVELS.index(level), "") if level in LEVELS else (9, level)


def level_table(
    summaries: list[Summary], failures: Sequence[Failure] = (), order: Sequence[str] = ()
) -> LevelTable:
    """Arrange run summaries into the level table; ``failures`` add columns for the guests
    that failed before anything was measured there (accelerator ``failed``). Rows go by
    workload in ``order`` (``kvmlab.bench.registry.table_order``), the others after them as
    they were measured.

    Linear in the summaries and failures (and sorting the columns): each summary fills
    one cell, its base found by key. Printing the table is rows x columns; a report
    refuses a table beyond :data:`MAX_CELLS` (:func:`check_size`).
    """
    variants = {
        v: i
        for i, v in enumerate(
            dict.fromkeys([*(s.variant for s in summaries), *(f.variant for f in failures)])
        )
    }
    columns: dict[tuple[str, str], Column] = {}
    for s in summaries:
        columns.setdefault((s.variant, s.guest), Column(s.variant, s.guest, s.level, s.accel))
    for f in failures:
        for guest in _guests(f) if f.level in LEVELS else []:
            columns.setdefault((f.variant, guest), Column(f.variant, guest, f.level, _outcome(f)))
    ordered = sorted(
        columns.values(), key=lambda c: (variants[c.variant], *_level_key(c.level), c.guest)
    )
    index = {(s.variant, s.guest, s.workload, s.metric): s for s in summaries}
    rows: dict[tuple[str, str], Row] = {}
    for s in summaries:
        rows.setdefault(
            (s.workload, s.metric), Row(s.workload, s.metric, s.unit, s.higher_is_better)
        )
    position = {col: i for i, col in enumerate(ordered)}
    for s in summaries:
        col = columns[(s.variant, s.guest)]
        here = index[(s.variant, s.guest, s.workload, s.metric)]
        if here is not s:  # a duplicate key: the last summary holds the cell
            continue
        base = None
        if col.parent_guest is not None:
            base = index.get((col.variant, col.parent_guest, s.workload, s.metric))
        delta = None if base is None else change_pct(here.median, base.median)
        verdict = None
        if base is not None and base.values and here.values:  # a tiny base: a verdict, no %
            verdict = compare(
                base.values, here.values, here.higher_is_better, noise_for(s.workload, s.metric)
            )
        rows[(s.workload, s.metric)].cells[col] = Cell(
            here, delta, None if base is None else base.median, verdict
        )
    for row in rows.values():  # cells in column order, as the tables print them
        row.cells = dict(sorted(row.cells.items(), key=lambda item: position[item[0]]))
    rank = {w: i for i, w in enumerate(order)}
    # known workloads in suite order, the others (a lab's migrations) as they were measured
    sorted_rows = sorted(rows.values(), key=lambda r: rank.get(r.workload, len(rank)))
    return LevelTable(ordered, sorted_rows, list(failures))
