"""``kvmlab migrate LAB/GUEST``: one running guest migrated with the settings a person gave
(``--mode auto``: the strategy the stored comparisons chose), measured and verified."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.progress import QUIET, Progress

if TYPE_CHECKING:
    from kvmlab.migrate.modes import Settings
    from kvmlab.migrate.pathprobe import PathProbeFactory
    from kvmlab.migrate.result import Outcome
    from kvmlab.migrate.transports.base import Route
    from kvmlab.migrate.workload import Workload

EXIT_NOT_COMPLETED = 3
"""The migration failed or was cancelled; the source kept running (and was verified)."""
EXIT_CORRUPTED = 5
"""The migration completed but the guest failed verification on the destination."""


def migrate_guest(
    address: str,
    settings: Settings,
    workload: Workload,
    route: Route,
    progress: Progress = QUIET,
    path_probe: PathProbeFactory | None = None,
) -> Outcome:
    """Migrate the running guest at ``address``: with ``settings``, or in ``auto`` mode
    with the stored comparisons' choice (and why); the outcome, whatever it is."""
    from kvmlab.migrate.engine import migrate

    reason = None
    if settings.mode == "auto":
        from kvmlab.migrate.stored import auto_by_hand

        settings, reason = auto_by_hand(address, settings, workload, route)
    return migrate(
        address, settings, workload, progress, route, auto_reason=reason, path_probe=path_probe
    )


def exit_status(outcome: Outcome) -> int:
    """How a migration ended, as an exit status: 0 verified, 130 interrupted,
    :data:`EXIT_CORRUPTED` completed but failed verification, else
    :data:`EXIT_NOT_COMPLETED`."""
    if outcome.interrupted:
        return 130
    if outcome.verified:
        return 0
    return EXIT_CORRUPTED if outcome.status == "completed" else EXIT_NOT_COMPLETED
