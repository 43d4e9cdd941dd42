"""Two kvmlab commands creating the run root at once (two ``libvirtd start`` of one name, as
the fresh machine ran them): the one that loses the race to mkdir checks the directory the
other made and goes on, instead of failing with "File exists"."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.proc import confined


def test_the_loser_of_the_mkdir_race_checks_what_the_winner_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "a" / "run"
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(root))
    real = confined._mkdir_private

    def beaten(path: Path) -> None:
        real(path)  # the other command made it first ...
        raise FileExistsError(17, "File exists", str(path))  # ... so this mkdir fails

    monkeypatch.setattr(confined, "_mkdir_private", beaten)
    assert confined.checked_run_root() == root
    assert (root / confined.MARKER).is_file() and root.stat().st_mode & 0o777 == 0o700
