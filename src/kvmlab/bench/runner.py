"""Running a suite's workloads at one level: warm-up, repetitions, samples stored as they come."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kvmlab.bench.executor import Background, Completed, Executor
from kvmlab.bench.parsers.errors import ParseError
from kvmlab.bench.suite import Settings
from kvmlab.bench.workloads import WORKLOADS, Step
from kvmlab.results.model import Sample
from kvmlab.results.store import ResultStore

Progress = Callable[[str], None]
BOOT_STAGES = ("qemu", "kernel", "init", "agent", "guest", "total")


@dataclass
class LevelRunner:
    """Runs workloads at one place and stores every repetition at once."""

    store: ResultStore
    run_id: int
    variant: str
    settings: Settings
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)
    """Wall seconds per ``"<level> <guest> <workload>"``: where a run's time went."""

    def boot(self, executor: Executor, stages: dict[str, float]) -> list[Sample]:
        """The guest's measured boot stages as samples of the ``boot`` workload."""
        if "boot" not in self.settings.workloads:
            return []
        place = executor.place
        samples = [
            Sample(self.variant, place.guest, place.level, place.accel, "boot", f"{stage}_s",
                   stages[stage], "s", False, 0, "kvmlab up (boot to guest agent ready)")
            for stage in BOOT_STAGES
            if stage in stages
        ]  # fmt: skip
        self.store.add(self.run_id, samples)
        return samples

    def workloads(self, executor: Executor, parent: Executor) -> list[Sample]:
        """Every command workload of the suite at ``executor``'s place."""
        samples: list[Sample] = []
        place = executor.place
        for name in self.settings.workloads:
            make = WORKLOADS.get(name)
            if make is None:
                continue
            steps = make(place, self.settings)
            if not steps:
                self.progress(f"{place.level} {place.guest}: {name} skipped ({_why(name)})")
            start = time.monotonic()
            for step in steps:
                samples.extend(self._step(executor, parent, name, step))
            key = f"{place.level} {place.guest} {name}"
            self.timings[key] = self.timings.get(key, 0.0) + time.monotonic() - start
        return samples

    def _step(
        self, executor: Executor, parent: Executor, workload: str, step: Step
    ) -> list[Sample]:
        place, s = executor.place, self.settings
        out: list[Sample] = []
        for rep in range(-s.warmup, s.repetitions):
            what = "warm-up" if rep < 0 else f"{rep + 1}/{s.repetitions}"
            self.progress(f"{place.level} {place.guest}: {workload} {step.name} ({what})")
            result = self._run(executor, parent, step)
            try:
                metrics = step.parse(result.stdout)
            except ParseError:
                result.check(f"{place.level} {place.guest}")
                raise
            if rep < 0:
                continue
            rows = [
                Sample(self.variant, place.guest, place.level, place.accel, workload,
                       step.label(m), m.value, m.unit, m.higher_is_better, rep,
                       shlex.join(step.argv))
                for m in metrics
                if not step.keep or m.name in step.keep
            ]  # fmt: skip
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


def _why(workload: str) -> str:
    return {
        "disk": "no scratch disk: give the guest a disk (it boots the default image)",
        "network": "no user-networking NIC to reach the level below",
    }.get(workload, "nothing to run here")
