"""The boot stages of guests just started, as ``kvmlab up`` shows them: a row per guest,
a column per stage any of them reached (seconds, measured)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvmlab.runtime.machine import Machine

STAGES = ("qemu", "kernel", "init", "agent", "guest", "total")
"""The boot stages in the order they happen (``total`` last)."""


def boot_table(machines: Sequence[Machine]) -> tuple[list[str], list[list[str]]]:
    """The stages any guest reached, and a row per guest: its name, its accelerator and
    each stage's seconds (``-`` for one it did not report)."""
    shown = [s for s in STAGES if any(s in m.boot for m in machines)]
    rows = [
        [
            m.config.name,
            m.config.accel,
            *(f"{m.boot[s]:.2f}" if s in m.boot else "-" for s in shown),
        ]
        for m in machines
    ]
    return shown, rows
