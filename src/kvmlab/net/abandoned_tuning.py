"""Tuning a kvmlab run applied and could not undo (it was killed): found and rolled back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvmlab.net.tune import Outcome


@dataclass(frozen=True)
class Abandoned:
    """The rollback of the tuning of a run that died: its pid and what was restored."""

    pid: int
    outcome: Outcome


def roll_back_abandoned(path: Path) -> Abandoned | None:
    """Roll back the tuning recorded at ``path`` when the run that owns it is dead; None
    when there is nothing to do (no record, no owner, the owner alive). A state file that is
    not kvmlab's record raises its :class:`~kvmlab.errors.KvmlabError`."""
    from kvmlab.net.tunestate import State
    from kvmlab.proc.processes import alive

    state = State(path)
    data = state.read()
    if data is None or data.owner is None:
        return None
    pid, started = data.owner
    if alive(pid, started=started):
        return None
    from kvmlab.net.tune import rollback  # (with the lab models: only for a run that died)

    return Abandoned(pid, rollback(state))
