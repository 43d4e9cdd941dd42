"""A lab's ``[[migrations]]`` inside ``kvmlab run``/``bench``: chosen, run, checked."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kvmlab.errors import UsageError
from kvmlab.spec import LoadedLab

if TYPE_CHECKING:
    from kvmlab.bench.runner import LevelRunner
    from kvmlab.guest.image import GuestImage
    from kvmlab.runtime.lab import HostAccel

MIGRATIONS = "migrations"
"""What ``--only`` calls a lab's ``[[migrations]]`` beside the suite's workloads."""


@dataclass
class MigrationPlan:
    """Whether a run executes the lab's migrations, and what came out corrupted."""

    wanted: bool
    corrupted: list[str] = field(default_factory=list)

    def after(
        self, host: HostAccel, image: Callable[[], GuestImage], line: Callable[[str], None],
        status: Callable[[str], None],
    ) -> Callable[[LevelRunner, LoadedLab], None] | None:  # fmt: skip
        """The hook :func:`kvmlab.bench.session.run_bench` calls after each variant's suite."""
        if not self.wanted:
            return None

        def run(runner: LevelRunner, variant: LoadedLab) -> None:
            from kvmlab.migrate.stored import measure

            guests = ", ".join(dict.fromkeys(m.guest for m in variant.lab.migrations))
            runner.at("L1", guests, MIGRATIONS)
            start = time.monotonic()
            found = measure(runner.store, runner.run_id, runner.variant, variant, host,
                            image, line, status)  # fmt: skip
            key = "migrations" if runner.variant == "default" else f"{runner.variant} migrations"
            runner.timings[key] = time.monotonic() - start
            shown = "" if runner.variant == "default" else f"{runner.variant}: "
            self.corrupted.extend(f"{shown}{f}" for f in found)

        return run


def split_only(
    loaded: LoadedLab, only: str | None, levels: set[str]
) -> tuple[list[str] | None, bool, MigrationPlan]:
    """``--only`` split into the suite's workloads and the migrations.

    Returns the suite's ``--only`` list (None: the suite's own), whether the suite runs at
    all, and the migration plan: the lab's ``[[migrations]]`` run when it declares them and
    L1 is measured, unless ``--only`` leaves them out. Refused: ``--only migrations`` for a
    lab without them, or without L1.
    """
    names = [w.strip() for w in only.split(",") if w.strip()] if only else None
    declared = bool(loaded.lab.migrations)
    if names is not None and MIGRATIONS in names:
        if not declared:
            raise UsageError(f"--only {MIGRATIONS}: {loaded.path} declares no [[migrations]]")
        if "L1" not in levels:
            raise UsageError(f"--only {MIGRATIONS}: the lab's migrations move L1 guests; "
                             "add L1 to --levels")  # fmt: skip
    wanted = declared and "L1" in levels and (names is None or MIGRATIONS in names)
    suite = None if names is None else [w for w in names if w != MIGRATIONS]
    return suite or None, suite != [], MigrationPlan(wanted)
