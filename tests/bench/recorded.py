"""The recorded tool outputs in ``data/`` and helpers to look at parser results."""

from __future__ import annotations

from pathlib import Path

from kvmlab.bench.parsers import Metric

DATA = Path(__file__).resolve().parent / "data"


def recorded(name: str) -> str:
    """The exact text of one recorded output."""
    return (DATA / name).read_text()


def by_name(metrics: list[Metric]) -> dict[str, Metric]:
    """Metrics keyed by name; a name returned twice fails the test."""
    names = [m.name for m in metrics]
    assert len(names) == len(set(names)), names
    return {m.name: m for m in metrics}


def values(metrics: list[Metric]) -> dict[str, float]:
    """Name -> value, in the order the parser returned them."""
    return {m.name: m.value for m in by_name(metrics).values()}
