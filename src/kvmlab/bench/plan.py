"""What a run measures: the suite's workloads, then the lab's own (:class:`LabWorkload`),
chosen from ``--only``, else the lab's ``[bench] workloads``, else the suite and what the lab
declares; refused before anything starts when the lab lacks what a named workload needs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvmlab.bench.registry import LabWorkload, Settings, lab_workloads
from kvmlab.bench.suite import settings_for
from kvmlab.errors import UsageError

if TYPE_CHECKING:
    from kvmlab.runtime.machine import Backend
    from kvmlab.spec import Lab, LoadedLab


@dataclass(frozen=True)
class Plan:
    """The suite's part of the selection and the lab's own workloads that run after it."""

    only: list[str] | None
    """The suite's workloads ``--only`` names (None: the suite's own, or the lab's)."""
    suite_runs: bool
    lab: tuple[LabWorkload, ...]
    """The lab's own workloads that run, in order."""

    def settings(self, suite: str, lab: Lab, variants: tuple[str, ...] = ()) -> Settings:
        """The suite's settings (the lab's ``[bench]`` values and ``--only`` applied)."""
        settings = replace(settings_for(suite, lab.bench, self.only), variants=variants)
        return settings if self.suite_runs else replace(settings, workloads=())

    def describe(self, lab: Lab) -> str:
        """``; PVP through the testpmd switch after the suite`` for each (or nothing)."""
        return "".join(f"; {w.describe(lab)} after the suite" for w in self.lab)


def plan(
    loaded: LoadedLab, only: str | None, levels: set[str], backend: Backend | None = None
) -> Plan:
    """``--only`` (else the lab's ``[bench] workloads`` when it names one of the lab's own)
    split into the suite's workloads and the lab's own.

    Each of the lab's own runs when the lab declares it and a level it needs is measured,
    unless the selection leaves it out (one the lab declares but runs only when named, e.g.
    netcompare over user NICs alone, needs naming). Naming one the lab does not declare, or
    without its level, is refused, as is one ``backend`` cannot run.
    """
    names = [w.strip() for w in only.split(",") if w.strip()] if only else None
    lab = loaded.lab
    own = list(lab.bench.workloads)
    workloads = lab_workloads()
    ours = {w.name for w in workloads}
    # a lab's list that names none of its own workloads selects among the suite's only
    picked = names if names is not None else (own if set(own) & ours else None)
    chosen = []
    for w in workloads:
        named = picked is not None and w.name in picked
        declared = w.declared(lab)
        if named and not declared:
            if names is None:
                raise UsageError(
                    f"{loaded.path}: bench.workloads names {w.name}, but the lab declares "
                    f"no {w.what}"
                )
            raise UsageError(f"--only {w.name}: {loaded.path} declares no {w.what}")
        if named and names is not None and not w.levels & levels:
            raise UsageError(
                f"--only {w.name}: needs level {' or '.join(sorted(w.levels))} in --levels"
            )
        wanted = named or (picked is None and w.unasked(lab))
        if declared and wanted and w.levels & levels:
            chosen.append(w)
    for w in chosen:
        if backend is not None and w.backend is not None:
            w.backend(backend, loaded)
    suite = None if names is None else [w for w in names if w not in ours]
    suite_runs = suite != [] and (names is not None or not own or any(w not in ours for w in own))
    return Plan(suite or None, suite_runs, tuple(chosen))
