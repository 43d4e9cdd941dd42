"""The by-configuration table of the nested-paging talk: the lab's configurations (the lab
as written and its variants) side by side, a row each, for the metrics that tell them
apart, at every level, with the deepest level against the lab as written; a configuration
this host could not run is a row too, with the reason (``host_kvm``: the host's own EPT/NPT
or VMCS shadowing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvmlab.report.fmt import number
from kvmlab.report.table import Cell, Column, LevelTable
from kvmlab.results.model import COMPARED_BY_FACT, KVM_UNDER_FACT, LEVELS, NOT_RUN_FACT

NOT_RUN, KVM_UNDER, COMPARED_BY = NOT_RUN_FACT, KVM_UNDER_FACT, COMPARED_BY_FACT


@dataclass(frozen=True)
class Headline:
    """A metric the configurations are compared by."""

    workload: str
    metric: str
    unit: str
    higher_is_better: bool

    @property
    def label(self) -> str:
        """``kbuild build_elapsed_s (s, lower is better)``."""
        better = "higher" if self.higher_is_better else "lower"
        return f"{self.workload} {self.metric} ({self.unit}, {better} is better)"


@dataclass
class Configuration:
    """One variant: its value per (metric, level), or why it did not run."""

    variant: str
    values: dict[tuple[Headline, str], Cell] = field(default_factory=dict)
    kvm: list[str] = field(default_factory=list)
    """The KVM its guests ran under (``l1/l2: kvm_amd: npt=0, ... (shadow paging)``)."""
    not_run: str | None = None

    @property
    def how(self) -> str:
        """The last column: why it did not run, or the KVM its guests ran under."""
        return f"not run: {self.not_run}" if self.not_run else "; ".join(self.kvm) or "-"


@dataclass
class ConfigurationTable:
    """Rows of configurations, columns of (metric, level), and the deepest level's ratio
    against the lab as written (``default``)."""

    headlines: list[Headline]
    levels: list[str]
    rows: list[Configuration]
    missing: list[str] = field(default_factory=list)
    """``[bench] headline`` names no row of the run has (a typo, a workload not run)."""

    _base: list[Configuration | None] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def _default(self) -> Configuration | None:
        """The lab as written (found once: :meth:`ratio` asks per row and metric)."""
        if not self._base:
            self._base.append(next((r for r in self.rows if r.variant == "default"), None))
        return self._base[0]

    @property
    def notes(self) -> list[str]:
        """One line per headline the run has no row for."""
        return [f"[bench] headline {m!r}: the run has no such row" for m in self.missing]

    def ratio(self, row: Configuration, headline: Headline) -> float | None:
        """The deepest level's value over the lab as written's (None without both)."""
        level = self.levels[-1]
        base = self._default()
        here, there = row.values.get((headline, level)), None
        if base is not None:
            there = base.values.get((headline, level))
        if here is None or there is None or there.summary.median == 0:
            return None
        return here.summary.median / there.summary.median


def configurations(
    table: LevelTable, host: Mapping[str, Any], wanted: Sequence[str] = ()
) -> ConfigurationTable | None:
    """The configurations of one run's level table (its ``host`` facts name those not run
    and the KVM each guest ran under); ``wanted``: ``workload.metric`` names to compare
    by (default: the first metric of each workload; one the run lacks is left out, and
    :func:`unmatched` names it). None with a single configuration or nothing measured.
    Each level shows its first guest (a lab with two guests at one level: their level
    table has both)."""
    not_run = {k.removeprefix(NOT_RUN): str(v) for k, v in host.items() if k.startswith(NOT_RUN)}
    variants = [*table.variants, *(v for v in not_run if v not in table.variants)]
    if len(variants) < 2:
        return None
    headlines = _headlines(table, wanted)
    levels = [lv for lv in LEVELS if any(c.level == lv for c in table.columns)]
    if not headlines or not levels:  # nothing measured (a run cut short before its first)
        return None
    firsts: dict[tuple[str, str], Column] = {}
    for c in table.columns:
        firsts.setdefault((c.variant, c.level), c)
    by_name = {(r.workload, r.metric): r for r in reversed(table.rows)}  # the first of each
    kvm: dict[str, list[str]] = {}  # variant -> its guests' KVM, from the host facts
    for k, v in host.items():
        if not k.startswith(KVM_UNDER):
            continue
        if not k.endswith(")"):  # the lab as written
            kvm.setdefault("default", []).append(f"{k.removeprefix(KVM_UNDER)}: {v}")
        elif " (" in k:  # ``kvm under LAB/GUEST (VARIANT)``
            place, variant = k[:-1].rsplit(" (", 1)
            if variant != "default":
                kvm.setdefault(variant, []).append(f"{place.removeprefix(KVM_UNDER)}: {v}")
    rows = []
    for variant in variants:
        row = Configuration(variant, not_run=not_run.get(variant))
        for level in levels:
            column = firsts.get((variant, level))
            for headline in headlines if column is not None else ():
                found = by_name.get((headline.workload, headline.metric))
                if found is not None and column in found.cells:
                    row.values[(headline, level)] = found.cells[column]
        row.kvm = kvm.get(variant, [])
        rows.append(row)
    return ConfigurationTable(headlines, levels, rows, unmatched(table, wanted))


def cell_value(cell: Cell | None) -> str:
    """``123 ±4%`` or ``-``."""
    if cell is None:
        return "-"
    s = cell.summary
    return number(s.median) + (f" ±{s.spread_pct / 2:.0f}%" if s.n > 1 else "")


def ratio_text(ratio: float | None) -> str:
    """``3.42x`` or ``-``."""
    return "-" if ratio is None else f"{ratio:.2f}x"


def _headlines(table: LevelTable, wanted: Sequence[str]) -> list[Headline]:
    rows = {(r.workload, r.metric): r for r in table.rows}
    if wanted:
        chosen = [str(w).partition(".")[::2] for w in wanted]
        picked = [rows[key] for key in chosen if key in rows]
    else:
        firsts: dict[str, Any] = {}
        for r in table.rows:
            firsts.setdefault(r.workload, r)
        picked = list(firsts.values())
    return [Headline(r.workload, r.metric, r.unit, r.higher_is_better) for r in picked]


def unmatched(table: LevelTable, wanted: Sequence[str]) -> list[str]:
    """The ``workload.metric`` names of ``wanted`` no row of the run has."""
    rows = {(r.workload, r.metric) for r in table.rows}
    return [w for w in wanted if tuple(str(w).partition(".")[::2]) not in rows]
