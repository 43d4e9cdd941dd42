"""Tuning left by a run that died (kvmlab.net.abandoned_tuning): nothing to do without a
record, or while its owner lives."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvmlab.net import abandoned_tuning, tunestate
from kvmlab.net.abandoned_tuning import roll_back_abandoned


def owned_by(monkeypatch: pytest.MonkeyPatch, owner: tuple[int, float] | None) -> None:
    monkeypatch.setattr(
        tunestate.State, "read", lambda self: SimpleNamespace(owner=owner), raising=True
    )


def test_no_record_nothing_to_do(tmp_path: Path) -> None:
    assert roll_back_abandoned(tmp_path / "absent.json") is None


def test_a_record_without_owner_or_whose_owner_lives_is_left(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    owned_by(monkeypatch, None)
    assert roll_back_abandoned(tmp_path / "t.json") is None
    owned_by(monkeypatch, (os.getpid(), 0.0))
    monkeypatch.setattr("kvmlab.proc.processes.alive", lambda pid, started: True)
    assert roll_back_abandoned(tmp_path / "t.json") is None


def test_a_dead_owners_tuning_is_rolled_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    owned_by(monkeypatch, (4242, 1.0))
    monkeypatch.setattr("kvmlab.proc.processes.alive", lambda pid, started: False)
    monkeypatch.setattr("kvmlab.net.tune.rollback", lambda state: "outcome")
    done = roll_back_abandoned(tmp_path / "t.json")
    assert done == abandoned_tuning.Abandoned(4242, "outcome")  # type: ignore[arg-type]
