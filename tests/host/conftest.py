"""Fixtures for the host doctor tests."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def tree_copy(tmp_path: Path) -> Callable[[Path], Path]:
    """Copy a recorded tree into tmp_path so a test can change it."""

    def copy(src: Path) -> Path:
        dest = tmp_path / src.name
        shutil.copytree(src, dest)
        return dest

    return copy
