"""The workload registry: each workload registered once, by the one module that defines it,
with the commands it runs and how their output is read, the metrics it stores and what it
needs of a guest and of the host. A benchmark run (:func:`kvmlab.bench.session.run_bench`)
runs every workload, the suite's and the lab's own, through this registry.

Four kinds, by when a workload runs:

- :class:`LevelWorkload`: commands at every level measured (L0 and each guest), the same
  argv everywhere (``cpu``, ``memory``, ``disk``, ``network``, ``kbuild``, ``fork``);
- :class:`BootStages`: the boot stages the runtime measured of each guest (``boot``);
- :class:`GuestsWorkload`: on the guests inside each guest hypervisor, while they are up,
  after their level workloads (``exits``);
- :class:`LabWorkload`: once per variant after its suite, bringing the lab up itself
  (``pvp``, ``netcompare``, ``migrations``).

A workload is a module in the ``workloads`` package of a domain (``kvmlab/bench/workloads``,
``kvmlab/net/workloads``) that calls :func:`register` when imported; :func:`workloads`
imports every such module, so ``bench`` names none of the domains that register. What a
workload needs from a domain ``bench`` may not import (the exit profiler, the migration
engine) it declares as a :class:`Provider`, which the command line hands in
(:class:`Provided`). ``kvmlab.spec.bench`` keeps the names and metrics a lab file may
mention; tests/bench/test_registry.py holds them equal to this registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

from kvmlab.bench.parsers.metric import Metric
from kvmlab.progress import Progress

if TYPE_CHECKING:
    from kvmlab.bench.executor import Place
    from kvmlab.errors import KvmlabError
    from kvmlab.results.model import Sample
    from kvmlab.results.store import ResultStore
    from kvmlab.runtime.lab import Launch
    from kvmlab.runtime.machine import Backend, Machine
    from kvmlab.runtime.rundir import GuestRecord
    from kvmlab.spec import Lab, LoadedLab

T = TypeVar("T")
At = Callable[[str, str, str], None]
"""``at(level, guest, stage)``: where the run is now (a failure is filed there)."""


AUTO_MIN = 3
"""``--reps auto`` takes at least this many repetitions: fewer give no usable interval."""


@dataclass(frozen=True)
class Settings:
    """Everything a workload needs to know about the suite it runs in."""

    suite: str
    workloads: tuple[str, ...]
    repetitions: int
    warmup: int
    duration: float
    """Seconds per timed repetition (sysbench --time, fio --runtime, iperf3 -t)."""
    fio_size: str
    fio_iodepth: int
    iperf3_streams: int
    ping_count: int
    variants: tuple[str, ...] = ()
    """The lab's variants to measure (``--variant``; ``default`` is the lab as written);
    empty: the lab as written, then every variant."""
    auto_width: float | None = None
    """``--reps auto``: repeat each step until every metric's 95 % interval is within
    ±this (relative: 0.05 is ±5 %), at least :data:`AUTO_MIN` times and at most
    ``repetitions`` times; None: exactly ``repetitions``."""
    interleave: bool = False
    """``--interleave``: the configurations' repetitions alternate (A B A B ...), each
    round a fresh boot of each, so drift of the host hits all alike."""


@dataclass(frozen=True)
class Step:
    """One command of a workload; its metrics are named ``<step>_<metric>`` (see :meth:`label`)."""

    name: str
    argv: list[str]
    parse: Callable[[str], list[Metric]]
    timeout: float
    keep: tuple[str, ...] = ()
    """Metric names to keep (empty: all the parser returns)."""
    server: list[str] | None = None
    """A server to start at the level below first (and stop after), e.g. ``iperf3 -s``."""
    scratch: bool = False
    """The step writes to ``Place.disk``: the runner provides and removes it at L0."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def label(self, metric: Metric) -> str:
        """The stored metric name: ``1thread_events_per_s``, ``randread_iops``."""
        if metric.name.startswith(self.name):
            return metric.name
        return f"{self.name}_{metric.name}"


Need = Literal["disk", "parent"]
"""What a level workload needs of a place beyond the benchmark tools: a scratch disk
(``Place.disk``), a route to the level below (``Place.parent_addr``)."""

UNMET: dict[str, str] = {
    "tools": "it is migratable: it boots the self-contained image, which has no benchmark tools",
    "disk": "no scratch disk: give the guest a disk (it boots the default image)",
    "parent": "no user-networking NIC to reach the level below",
}
"""Why a level workload cannot run at a place, by what it lacks."""


@dataclass(frozen=True)
class LevelWorkload:
    """Commands run at every level measured, the same argv at L0 and in guests."""

    name: str
    order: int
    """Its place among the workloads: in a suite, in the level table."""
    steps: Callable[[Place, Settings], list[Step]]
    """The commands at a place (called only where :meth:`unmet` is None)."""
    metrics: tuple[str, ...]
    """What it stores (``<step>_<metric>`` of every step's ``keep``)."""
    suites: tuple[str, ...]
    """The suites that run it (``quick``, ``full``)."""
    needs: tuple[Need, ...] = ()

    def unmet(self, place: Place) -> str | None:
        """Why it cannot run at ``place`` (None: it can)."""
        if not place.tools:
            return UNMET["tools"]
        have = {"disk": place.disk, "parent": place.parent_addr}
        return next((UNMET[need] for need in self.needs if have[need] is None), None)


@dataclass(frozen=True)
class BootStages:
    """The boot stages the runtime measured of each guest, stored as seconds."""

    name: str
    order: int
    stages: tuple[str, ...]
    suites: tuple[str, ...]
    command: str
    """What the samples say measured them."""

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(f"{stage}_s" for stage in self.stages)


@dataclass
class GuestsUp:
    """What a :class:`GuestsWorkload` gets: a guest hypervisor with its guests running."""

    lab: LoadedLab
    """The lab as written (what chose the run's workloads)."""
    variant: str
    hypervisor: Machine
    guests: list[GuestRecord]
    provided: Provided
    add: Callable[[list[Sample]], None]
    """Stores samples with the run."""
    at: At
    progress: Progress
    shown: Callable[[str], str]
    """A guest's address as users type it (``nested/l1/l2``)."""


@dataclass(frozen=True)
class GuestsWorkload:
    """Runs on the guests inside each guest hypervisor (L2), while they are up."""

    name: str
    order: int
    wanted: Callable[[Lab], bool]
    """Whether the lab asks for it (it runs only then, and only when L2 is measured)."""
    run: Callable[[GuestsUp], None]
    metrics: tuple[str, ...] = ()
    """What it stores, when that is fixed."""


@dataclass
class LabRun:
    """What a :class:`LabWorkload` gets: one variant of the lab, and where its results go."""

    lab: LoadedLab
    """The variant (the lab as written is variant ``default``)."""
    variant: str
    levels: set[str]
    repetitions: int
    """The suite's repetitions (a lab's own table may set its own)."""
    launch: Launch
    """How guests start (their backend), and where progress goes."""
    at: At
    store: ResultStore
    run_id: int
    provided: Provided

    def add(self, samples: list[Sample]) -> None:
        """Store samples with the run, at once."""
        self.store.add(self.run_id, samples)

    def keep(self, kind: str, document: dict[str, Any]) -> None:
        """Store a document of the variant with the run (what samples cannot hold)."""
        self.store.add_document(self.run_id, self.variant, kind, document)


def _always(lab: Lab) -> bool:
    return True


@dataclass(frozen=True)
class LabWorkload:
    """Runs once per variant after its suite, bringing the lab up itself; chosen by what the
    lab declares (unless ``--only`` or ``[bench] workloads`` leave it out)."""

    name: str
    order: int
    what: str
    """What the lab declares for it (``[switch]``), as refusals name it."""
    levels: frozenset[str]
    """It runs when one of these levels is measured."""
    declared: Callable[[Lab], bool]
    describe: Callable[[Lab], str]
    """What it does, in the plan a run prints first (``PVP through the testpmd switch``)."""
    run: Callable[[LabRun], list[str]]
    """Measures and stores; returns what it found wrong (see :attr:`fault`)."""
    unasked: Callable[[Lab], bool] = _always
    """Whether, declared, it runs without being named (else only when named)."""
    backend: Callable[[Backend, LoadedLab], None] | None = None
    """Refuses (:class:`~kvmlab.errors.UsageError`) a backend that cannot run it."""
    fault: Callable[[int, list[str]], KvmlabError] | None = None
    """The error the command ends with, after the report, when a run found something wrong
    (run id, what every variant found)."""
    metrics: tuple[str, ...] = ()
    """What it stores, when that is fixed."""


Workload = LevelWorkload | BootStages | GuestsWorkload | LabWorkload


@dataclass(frozen=True)
class Provider(Generic[T]):
    """A function a workload needs from a domain ``bench`` may not import (``exits``,
    ``migrate``), declared by that workload's module and handed in by the command line."""

    name: str

    def given(self, value: T) -> tuple[str, object]:
        """``value`` as this provider, for :class:`Provided`."""
        return (self.name, value)


class Provided:
    """The providers a run was handed (``Provided(PROFILER.given(profile_guest))``)."""

    def __init__(self, *given: tuple[str, object]) -> None:
        self._given = dict(given)

    def __call__(self, provider: Provider[T]) -> T:
        if provider.name not in self._given:
            raise LookupError(f"the run was not handed {provider.name} (run_bench(provided=...))")
        return cast(T, self._given[provider.name])


_REGISTERED: dict[str, Workload] = {}
_loaded = False


def register(workload: Workload) -> Workload:
    """Add a workload (its module calls this when imported); a name is registered once."""
    known = _REGISTERED.get(workload.name)
    if known is not None and known is not workload:
        raise ValueError(f"a workload named {workload.name!r} is registered already")
    _REGISTERED[workload.name] = workload
    return workload


def workloads() -> tuple[Workload, ...]:
    """Every workload, in order (a suite's, the level table's rows, the lab's own after a
    suite), each workload module imported on the first call."""
    global _loaded
    if not _loaded:
        root = Path(__file__).resolve().parents[1]
        for path in sorted(root.glob("*/workloads/*.py")):
            if path.stem != "__init__":
                importlib.import_module(f"kvmlab.{path.parent.parent.name}.workloads.{path.stem}")
        _loaded = True
    return tuple(sorted(_REGISTERED.values(), key=lambda w: (w.order, w.name)))


def named(name: str) -> Workload | None:
    """The workload called ``name``, if one is."""
    return next((w for w in workloads() if w.name == name), None)


def level_workloads() -> tuple[LevelWorkload, ...]:
    return tuple(w for w in workloads() if isinstance(w, LevelWorkload))


def boot_stages() -> tuple[BootStages, ...]:
    return tuple(w for w in workloads() if isinstance(w, BootStages))


def guests_workloads() -> tuple[GuestsWorkload, ...]:
    return tuple(w for w in workloads() if isinstance(w, GuestsWorkload))


def lab_workloads() -> tuple[LabWorkload, ...]:
    return tuple(w for w in workloads() if isinstance(w, LabWorkload))


def suite_workloads(suite: str | None = None) -> tuple[str, ...]:
    """The workloads a suite may run (of ``suite``: the ones it runs), in order."""
    return tuple(
        w.name
        for w in workloads()
        if isinstance(w, LevelWorkload | BootStages) and (suite is None or suite in w.suites)
    )


def table_order() -> tuple[str, ...]:
    """The workloads measured level by level, in the order the level table shows them (the
    others, a lab's own, follow as they were measured)."""
    return tuple(w.name for w in workloads() if not isinstance(w, LabWorkload))
