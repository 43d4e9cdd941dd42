"""A tuning state write that fails (a full disk) leaves no ``.NAME.tmp`` behind.

``kvmlab tune apply`` on a full disk used to leave ``.t.json.tmp`` beside the state file:
:meth:`kvmlab.net.tunestate.State.write` now removes its temporary file whenever the write
fails, and the state file already there stays as it was. Runs on a stand-in host root."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NoReturn

import pytest

from kvmlab.net.tune import apply, cpu_partitioning
from kvmlab.net.tunestate import SavedChange, SavedState, State, StateWriteError
from tests.net.test_tune import FILES, host  # noqa: F401  (the stand-in root fixture)


def full(*_args: object) -> NoReturn:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def record(original: str = "1") -> SavedState:
    change = SavedChange(name="KSM", path="sys/kernel/mm/ksm/run", original=original, wanted="0")
    return SavedState(owner=None, root="/", changes=[change])


@pytest.mark.parametrize("where", ["fsync", "write"])
def test_a_failed_write_removes_its_temporary_file(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = State(tmp_path / "t.json")
    if where == "fsync":
        monkeypatch.setattr(os, "fsync", full)
    else:
        real = os.fdopen

        class Full:
            def __init__(self, fd: int, mode: str) -> None:
                self.f = real(fd, mode)

            def __enter__(self) -> Full:
                return self

            def __exit__(self, *exc: object) -> None:
                self.f.close()

            def write(self, _text: str) -> NoReturn:
                full()

        monkeypatch.setattr(os, "fdopen", Full)
    with pytest.raises(StateWriteError, match=r"cannot save the tuning state \(No space left"):
        state.write(record())
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_state_file_already_there_stays_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = State(tmp_path / "t.json")
    state.write(record("1"))
    before = state.path.read_bytes()
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StateWriteError):
        state.write(record("2"))
    monkeypatch.undo()
    assert state.path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_apply_on_a_full_disk_changes_nothing_and_leaves_no_temporary_file(
    host: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    states = tmp_path / "state"
    states.mkdir(mode=0o700)
    state = State(states / "t.json")
    settings = cpu_partitioning([3], host)
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(StateWriteError):
        apply(settings, state, root=host)
    monkeypatch.undo()
    assert list(states.iterdir()) == []
    for rel, text in FILES.items():  # the original is saved before a value changes: none did
        assert (host / rel).read_text() == text + "\n", rel
