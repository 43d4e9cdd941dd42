"""The level table of seed 000: a row per metric, a column per level, each level's change
against the level below it; a run cut short also names what failed, where."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kvmlab.results.model import LEVELS, Failure, Summary
from kvmlab.results.stats import change_pct

WORKLOAD_ORDER = ("cpu", "memory", "disk", "network", "boot", "kbuild", "fork", "exits")
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

    @property
    def worse(self) -> bool | None:
        """Whether the change is a loss (lower throughput, longer time); None without one.
        Also against a base too small for a ratio (0.0005% loss growing to 40%)."""
        delta = (
            self.change_pct
            if self.change_pct is not None
            else None
            if self.base is None
            else self.summary.median - self.base
        )
        if delta is None or delta == 0:
            return None
        return (delta < 0) == self.summary.higher_is_better


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

    @property
    def variants(self) -> list[str]:
        """The variants present, in column order."""
        return list(dict.fromkeys(c.variant for c in self.columns))

    def failed(self, col: Column) -> Failure | None:
        """The failure at this column's guest (not its teardown), if one happened there."""
        return next(
            (
                f
                for f in self.failures
                if (f.variant, f.level) == (col.variant, col.level)
                and col.guest in _guests(f)
                and f.stage != "teardown"
            ),
            None,
        )

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


def _outcome(failure: Failure) -> str:
    return INTERRUPTED if failure.interrupted else FAILED


def _guests(failure: Failure) -> list[str]:
    return [g for g in failure.guest.split(", ") if g]


def _column_key(c: Column, variants: list[str]) -> tuple[int, int, str]:
    return (variants.index(c.variant), LEVELS.index(c.level) if c.level in LEVELS else 9, c.guest)


def level_table(summaries: list[Summary], failures: Sequence[Failure] = ()) -> LevelTable:
    """Arrange run summaries into the level table; ``failures`` add columns for the guests
    that failed before anything was measured there (accelerator ``failed``)."""
    variants = list(
        dict.fromkeys([*(s.variant for s in summaries), *(f.variant for f in failures)])
    )
    columns: dict[tuple[str, str], Column] = {}
    for s in summaries:
        columns.setdefault((s.variant, s.guest), Column(s.variant, s.guest, s.level, s.accel))
    for f in failures:
        for guest in _guests(f) if f.level in LEVELS else []:
            columns.setdefault((f.variant, guest), Column(f.variant, guest, f.level, _outcome(f)))
    ordered = sorted(columns.values(), key=lambda c: _column_key(c, variants))
    index = {(s.variant, s.guest, s.workload, s.metric): s for s in summaries}
    rows: dict[tuple[str, str], Row] = {}
    for s in summaries:
        rows.setdefault(
            (s.workload, s.metric), Row(s.workload, s.metric, s.unit, s.higher_is_better)
        )
    for row in rows.values():
        for col in ordered:
            here = index.get((col.variant, col.guest, row.workload, row.metric))
            if here is None:
                continue
            base = None
            if col.parent_guest is not None:
                base = index.get((col.variant, col.parent_guest, row.workload, row.metric))
            delta = None if base is None else change_pct(here.median, base.median)
            row.cells[col] = Cell(here, delta, None if base is None else base.median)
    order = {w: i for i, w in enumerate(WORKLOAD_ORDER)}
    # known workloads in suite order, the others (a lab's migrations) as they were measured
    sorted_rows = sorted(rows.values(), key=lambda r: order.get(r.workload, 99))
    return LevelTable(ordered, sorted_rows, list(failures))
