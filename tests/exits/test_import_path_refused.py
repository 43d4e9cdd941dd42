"""``kvmlab exits --import`` of a path that is no report file: a device node is refused
without being opened (opening one can act: a watchdog arms), an empty path in one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kvmlab.errors import UsageError
from kvmlab.exits.perfkvm import import_file


def test_an_exits_import_of_a_device_is_refused_without_opening_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[str] = []
    real = os.open

    def recording_open(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> int:
        opened.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    with pytest.raises(UsageError, match="a character device"):
        import_file(Path("/dev/zero"), "x", 1.0)
    assert "/dev/zero" not in opened


def test_an_empty_import_path_is_refused_in_one_line() -> None:
    from tests.conftest import cli

    got = cli(dict(os.environ), "exits", "--import", "")
    assert got.returncode == 2 and "--import: give the file of a" in got.stderr
