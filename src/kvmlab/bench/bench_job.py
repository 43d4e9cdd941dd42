"""``kvmlab bench`` and ``run`` as a job: what a run measures, checked before anything runs
(:func:`plan_bench`), then the run itself (:func:`run_recorded`), which keeps a run that was
stored when a level fails after it, so what was measured is still reported."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kvmlab.errors import KvmlabError, UsageError, printable

if TYPE_CHECKING:
    from kvmlab.bench.plan import Plan
    from kvmlab.bench.registry import Provided, Settings
    from kvmlab.results.store import ResultStore
    from kvmlab.runtime.lab import Launch
    from kvmlab.runtime.machine import Backend
    from kvmlab.spec import LoadedLab


@dataclass(frozen=True)
class BenchJob:
    """What a run measures: the lab, the levels, the suite's settings and the lab's own
    workloads (:class:`~kvmlab.bench.plan.Plan`)."""

    loaded: LoadedLab
    levels: set[str]
    planned: Plan
    settings: Settings


def plan_bench(
    loaded: LoadedLab,
    backend: Backend,
    levels: str | None,
    only: str | None,
    suite: str,
    variants: Sequence[str] = (),
    reps: str | None = None,
    interleave: bool = False,
) -> BenchJob:
    """The job ``kvmlab bench`` runs, every part checked (a :class:`KvmlabError` before
    anything runs): the levels (``levels``: those, else all the lab has) against the lab
    and ``backend``, the variants (``variants``: those), the workloads (``only``), and that
    ``backend`` can run every variant."""
    from kvmlab.bench.plan import plan
    from kvmlab.bench.session import lab_levels, parse_levels

    wanted = parse_levels(levels, loaded) if levels is not None else lab_levels(loaded)
    wanted = backend.levels(loaded, wanted, levels is not None)
    chosen = loaded.variants(variants)  # an unknown name is refused before anything runs
    planned = plan(loaded, only, wanted, backend)
    for variant in chosen.values():  # refused before L0 is measured
        backend.check(variant, start_inner="L2" in wanted)
    settings = with_reps(
        planned.settings(suite, loaded.lab, tuple(chosen) if variants else ()), reps
    )
    if interleave:
        settings = interleaved(settings, len(chosen), wanted)
    return BenchJob(loaded, wanted, planned, settings)


def interleaved(settings: Settings, configurations: int, levels: set[str]) -> Settings:
    """``settings`` with ``--interleave``, refused where there is nothing to alternate."""
    if configurations < 2:
        raise UsageError(
            "--interleave alternates configurations: measure two or more (a lab with "
            "variants, or --variant default,NAME)"
        )
    if not levels & {"L1", "L2"}:
        raise UsageError("--interleave alternates guests' boots; L0 is measured once: add L1")
    if settings.auto_width is not None:
        raise UsageError("--interleave runs rounds of one repetition each: give --reps N")
    return replace(settings, interleave=True)


AUTO_WIDTH = 0.05
"""``--reps auto``: repeat until every metric's 95 % interval is within ±5 %..."""
AUTO_MAX = 10
"""... or this many repetitions were taken."""


def with_reps(settings: Settings, reps: str | None) -> Settings:
    """``settings`` with ``--reps``: a count (1-100), or ``auto`` (until every metric's
    interval is within ±:data:`AUTO_WIDTH`, at least 3 and at most :data:`AUTO_MAX`)."""
    if reps is None:
        return settings
    if reps == "auto":
        return replace(settings, repetitions=AUTO_MAX, auto_width=AUTO_WIDTH)
    if not reps.isdigit() or not 1 <= int(reps) <= 100:
        raise UsageError(f"--reps {printable(reps)}: give a count from 1 to 100, or auto")
    return replace(settings, repetitions=int(reps))


@dataclass
class Recorded:
    """A run that was stored: its id, the error that cut it short (None: it ran to the end)
    and the faults of workloads that ended the command with an error after the report."""

    run_id: int
    failure: BaseException | None = None
    faults: list[KvmlabError] = field(default_factory=list)


def run_recorded(
    job: BenchJob,
    store: ResultStore,
    launch: Launch,
    facts: dict[str, Any],
    timings: dict[str, float],
    provided: Provided | None = None,
) -> Recorded:
    """Run ``job`` into ``store`` (``timings``: each stage's seconds, as they come).

    An error (or Ctrl-C) before the run was stored is raised; after, it is returned with
    the run (:attr:`Recorded.failure`) so the caller reports what was measured first."""
    from kvmlab.bench.session import run_bench

    stored: list[int] = []
    faults: list[KvmlabError] = []
    try:
        run_id = run_bench(
            job.loaded,
            job.settings,
            job.levels,
            store,
            launch,
            facts,
            timings,
            on_start=stored.append,
            lab_workloads=job.planned.lab,
            provided=provided,
            faults=faults,
        )
    except (Exception, KeyboardInterrupt) as exc:
        if not stored:  # refused before anything was stored: nothing to report
            raise
        return Recorded(stored[0], exc, faults)
    return Recorded(run_id, None, faults)
