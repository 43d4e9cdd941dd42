"""The lab files shipped with kvmlab (also at ``labs/`` in the source tree)."""

from __future__ import annotations

from pathlib import Path


def lab_path(name: str) -> Path:
    """The shipped lab ``name`` (``nested``, ``basic``, ...)."""
    return Path(__file__).with_name(f"{name}.toml")
