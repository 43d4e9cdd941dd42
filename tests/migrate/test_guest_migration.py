"""``kvmlab migrate LAB/GUEST``'s job (kvmlab.migrate.guest_migration): the exit status an
outcome ends with, and ``--mode auto`` taking the stored comparisons' choice."""

from __future__ import annotations

from typing import Any

import pytest

from kvmlab.migrate import engine, stored
from kvmlab.migrate.guest_migration import (
    EXIT_CORRUPTED,
    EXIT_NOT_COMPLETED,
    exit_status,
    migrate_guest,
)
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.transports.base import Route
from kvmlab.migrate.workload import Workload


def test_each_ending_has_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    assert exit_status(Outcome("lab/vm", "precopy", interrupted=True)) == 130
    assert exit_status(Outcome("lab/vm", "precopy", status="failed")) == EXIT_NOT_COMPLETED
    monkeypatch.setattr(Outcome, "verified", property(lambda self: False))
    assert exit_status(Outcome("lab/vm", "precopy", status="completed")) == EXIT_CORRUPTED
    monkeypatch.setattr(Outcome, "verified", property(lambda self: True))
    assert exit_status(Outcome("lab/vm", "precopy", status="completed")) == 0


def test_auto_takes_the_stored_choice_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    chosen = Settings(mode="postcopy")

    def auto(address: str, settings: Settings, workload: Workload, route: Route) -> Any:
        return chosen, "the newest comparison paused it least"

    def migrate(address: str, settings: Settings, *args: Any, **kwargs: Any) -> Outcome:
        seen.update(settings=settings, **kwargs)
        return Outcome(address, settings.mode)

    monkeypatch.setattr(stored, "auto_by_hand", auto)
    monkeypatch.setattr(engine, "migrate", migrate)
    route = Route(to_uri=None, dest_qemu=None, channel="tcp")
    outcome = migrate_guest("lab/vm", Settings(mode="auto"), Workload(128, 20.0), route)
    assert outcome.plan == "postcopy"
    assert seen == {
        "settings": chosen,
        "auto_reason": "the newest comparison paused it least",
        "path_probe": None,
    }


def test_a_mode_given_is_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    def auto(*args: Any) -> Any:
        raise AssertionError("auto_by_hand consulted for a given mode")

    monkeypatch.setattr(stored, "auto_by_hand", auto)
    monkeypatch.setattr(
        engine, "migrate", lambda address, settings, *a, **k: Outcome(address, settings.mode)
    )
    route = Route(to_uri=None, dest_qemu=None, channel="tcp")
    assert migrate_guest("lab/vm", Settings(mode="xbzrle"), Workload(1, 0.0), route).plan == (
        "xbzrle"
    )
