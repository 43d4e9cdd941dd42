"""Running a suite's workloads at one level: warm-up, repetitions, samples stored as they come.

The runner also knows where the run is (level, guest, stage), so a failure is stored with
the place it happened (:meth:`LevelRunner.fail`), and says each finished stage in one line.
"""

from __future__ import annotations

import shlex
import statistics
import time
from dataclasses import dataclass, field, replace

from kvmlab.bench.executor import Background, Completed, Executor, Place
from kvmlab.bench.parsers.errors import ParseError
from kvmlab.bench.registry import AUTO_MIN, BootStages, LevelWorkload, Settings, Step, named
from kvmlab.errors import KvmlabError
from kvmlab.progress import Progress
from kvmlab.results.model import SKIPPED, Failure, Sample
from kvmlab.results.store import ResultStore
from kvmlab.results.verdict import precision

NOTHING = "nothing to run here"
"""Why a workload that needs nothing missing here has no command to run."""


@dataclass
class Stage:
    """Where a run is: the level, the guest(s) there, and what it does (boot, a workload)."""

    level: str = ""
    guest: str = ""
    what: str = ""


@dataclass
class LevelRunner:
    """Runs workloads at one place and stores every repetition at once.

    ``progress`` hears of each finished stage (a guest booted, a workload done with its
    wall time) and, as detail, of each repetition.
    """

    store: ResultStore
    run_id: int
    variant: str
    settings: Settings
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)
    """Wall seconds per ``"<level> <guest> <workload>"``: where a run's time went."""
    lab: str = ""
    """The lab's name, to name guests in progress lines as users type them."""
    stage: Stage = field(default_factory=Stage)
    _failed: list[BaseException] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Each workload asked for that could not run somewhere, as its headline."""
    rep_offset: int = 0
    """Added to each stored repetition's number (an interleaved run's round)."""

    def at(self, level: str, guest: str, what: str) -> None:
        """Note where the run is now (the place a failure is filed under)."""
        self.stage = Stage(level, guest, what)

    def name(self, place: Place) -> str:
        """``L1 nested/l1``, ``L0 host`` (with the variant in front unless ``default``)."""
        where = f"{place.level} {self.shown(place.guest)}"
        return where if self.variant == "default" else f"{self.variant}: {where}"

    def shown(self, guests: str) -> str:
        """Guest addresses as users type them: ``nested/l1/l2`` for ``l1/l2``."""
        return ", ".join(
            g if g == "host" or not self.lab else f"{self.lab}/{g}" for g in guests.split(", ") if g
        )

    def fail(self, exc: BaseException) -> Failure | None:
        """Store ``exc`` as a failure at the current stage and say so; None if stored already.

        A second error (a teardown failing after the first error) is stored too.
        """
        if any(exc is seen for seen in self._failed):
            return None
        self._failed.append(exc)
        message, detail, code = describe(exc)
        at = self.stage
        failure = Failure(self.variant, at.level, at.guest, at.what, message, code, detail)
        self.store.add_failure(self.run_id, failure)
        self.progress.step(replace(failure, guest=self.shown(failure.guest)).headline)
        return failure

    def skip(self, place: Place, workload: str, reason: str) -> None:
        """A workload asked for that cannot run at ``place``: stored as a failure of the run
        (which is then incomplete), with the reason, and said."""
        failure = Failure(
            self.variant,
            place.level,
            place.guest,
            workload,
            f"{SKIPPED}{reason}",
            WorkloadsSkipped.exit_code,
        )
        self.store.add_failure(self.run_id, failure)
        self.skipped.append(replace(failure, guest=self.shown(failure.guest)).headline)
        self.progress.step(self.skipped[-1])

    def boot(self, executor: Executor, stages: dict[str, float], say: bool = True) -> list[Sample]:
        """The guest's measured boot stages as samples of the ``boot`` workload.

        ``say``: print the ``booted`` line (the runtime says it for nested guests itself).
        """
        place = executor.place
        if say:
            took = f", {stages['total']:.1f} s to its agent" if "total" in stages else ""
            self.progress.step(f"{self.name(place)} booted ({place.accel}{took})")
        samples = []
        for name in self.settings.workloads:
            w = named(name)
            if not isinstance(w, BootStages):
                continue
            samples += [
                Sample(
                    self.variant,
                    place.guest,
                    place.level,
                    place.accel,
                    w.name,
                    f"{stage}_s",
                    stages[stage],
                    "s",
                    False,
                    self.rep_offset,
                    w.command,
                )
                for stage in w.stages
                if stage in stages
            ]
        if samples:
            self.store.add(self.run_id, samples)
        return samples

    def workloads(self, executor: Executor, parent: Executor) -> list[Sample]:
        """Every level workload of the suite at ``executor``'s place."""
        samples: list[Sample] = []
        place = executor.place
        for name in self.settings.workloads:
            w = named(name)
            if not isinstance(w, LevelWorkload):
                continue
            self.at(place.level, place.guest, name)
            unmet = w.unmet(place)
            steps = w.steps(place, self.settings) if unmet is None else []
            if not steps:
                self.skip(place, name, unmet or NOTHING)
                continue
            start = time.monotonic()
            done: list[Sample] = []
            for step in steps:
                done.extend(self._step(executor, parent, name, step))
            spent = time.monotonic() - start
            key = f"{place.level} {place.guest} {name}"
            self.timings[key] = self.timings.get(key, 0.0) + spent
            self.progress.step(f"{self.name(place)} {name} done ({spent:.1f} s{_headline(done)})")
            samples.extend(done)
        return samples

    def _step(
        self, executor: Executor, parent: Executor, workload: str, step: Step
    ) -> list[Sample]:
        place, s = executor.place, self.settings
        out: list[Sample] = []
        most = f"at most {s.repetitions}" if s.auto_width is not None else str(s.repetitions)
        for rep in range(-s.warmup, s.repetitions):
            if rep >= AUTO_MIN and s.auto_width is not None and precise(out, s.auto_width):
                self.progress.detail(
                    f"{self.name(place)}: {workload} {step.name} within ±{s.auto_width:.0%} "
                    f"after {rep} repetitions"
                )
                break
            what = "warm-up" if rep < 0 else f"{rep + 1}/{most}"
            self.progress.detail(f"{self.name(place)}: {workload} {step.name} ({what})")
            result = self._run(executor, parent, step)
            try:
                metrics = step.parse(result.stdout)
            except ParseError:
                result.check(f"{place.level} {place.guest}")
                raise
            if rep < 0:
                continue
            rows = [
                Sample(
                    self.variant,
                    place.guest,
                    place.level,
                    place.accel,
                    workload,
                    step.label(m),
                    m.value,
                    m.unit,
                    m.higher_is_better,
                    rep + self.rep_offset,
                    shlex.join(step.argv),
                )
                for m in metrics
                if not step.keep or m.name in step.keep
            ]
            self.store.add(self.run_id, rows)
            out.extend(rows)
        return out

    def _run(self, executor: Executor, parent: Executor, step: Step) -> Completed:
        """Run a step, with its server at the level below when it has one."""
        if step.server is None:
            return executor.run(step.argv, step.timeout)
        for attempt in range(5):
            server: Background = parent.start(step.server)
            try:
                time.sleep(0.3 * (attempt + 1))  # the server binds its port
                result = executor.run(step.argv, step.timeout)
            finally:
                server.stop()
            if "unable to connect" not in result.stdout + result.stderr:
                return result
        return result


def precise(samples: list[Sample], width: float) -> bool:
    """Whether every metric of ``samples`` places its centre within ±``width`` (95 %)."""
    values: dict[str, list[float]] = {}
    for sample in samples:
        values.setdefault(sample.metric, []).append(sample.value)
    for series in values.values():
        half = precision(series)
        if half is None or half > width:
            return False
    return True


def describe(exc: BaseException) -> tuple[str, str, int | None]:
    """An error as (first line, other lines, exit status): what a failure record keeps."""
    if isinstance(exc, KeyboardInterrupt):
        return "Ctrl-C, SIGTERM or SIGHUP arrived", "", 130
    if isinstance(exc, KvmlabError):
        lines = "\n".join(exc.lines()).splitlines() or [type(exc).__name__]
        return lines[0], "\n".join(lines[1:]), exc.exit_code
    lines = f"{type(exc).__name__}: {exc}".splitlines()
    return lines[0], "\n".join(lines[1:]), None


def _headline(samples: list[Sample]) -> str:
    """``; 1thread_events_per_s 455 events/s``: the workload's first metric, median."""
    if not samples:
        return ""
    first = samples[0]
    value = statistics.median(s.value for s in samples if s.metric == first.metric)
    shown = f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"; {first.metric} {shown} {first.unit}"


class WorkloadsSkipped(KvmlabError):
    """Workloads asked for were not measured somewhere; the run is stored incomplete."""

    exit_code = 3

    def __init__(self, skipped: list[str]) -> None:
        self.skipped = skipped
        super().__init__(f"the run is incomplete: {'; '.join(skipped)}")
