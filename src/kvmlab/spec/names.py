"""Lab names and guest addresses as users type them, checked before they reach a path.

Every name that becomes part of a file-system path (a lab's run directory, a guest's
run directory) passes through here first, whatever its source: the command line, a lab
file, the environment or state found on disk. A name is lower case letters, digits and
dashes (``NAME_PATTERN``), so it can never be empty, ``.``, ``..``, absolute, or carry
a ``/``; an address is ``LAB/GUEST[/GUEST...]`` of such names.
"""

from __future__ import annotations

import re

from kvmlab.errors import UsageError

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
"""Lab and guest names: lower case, digits and dashes, used in paths and addresses."""

_NAME = re.compile(NAME_PATTERN)
MAX_DEPTH = 4
"""Guests deep an address may reach (lab, L1, L2, ... L4)."""


def is_name(text: str) -> bool:
    """Whether ``text`` is a valid lab or guest name."""
    return _NAME.fullmatch(text) is not None


def _shown(text: str) -> str:
    """``text`` for an error line: quoted, control characters escaped, long ones shortened."""
    shown = repr(text)
    return shown if len(shown) <= 72 else f"{shown[:60]}...' ({len(text)} characters)"


def lab_name(text: str, what: str = "lab name") -> str:
    """``text`` when it is a valid lab name, else a :class:`UsageError` saying why."""
    if not is_name(text):
        raise UsageError(
            f"{_shown(text)} is not a {what}: names are 1-32 lower-case letters, digits and "
            "dashes, starting with a letter (as in 'kvmlab ps')"
        )
    return text


def parse_address(text: str) -> tuple[str, tuple[str, ...]]:
    """``"lab/l1/l2"`` -> ``("lab", ("l1", "l2"))``; anything else is a :class:`UsageError`."""
    parts = text.split("/")
    if len(parts) > MAX_DEPTH + 1 and all(is_name(p) for p in parts):
        raise UsageError(
            f"{_shown(text)} is not a guest address: it is {len(parts) - 1} guests deep, and "
            f"guests nest at most {MAX_DEPTH} levels (LAB/L1/.../L{MAX_DEPTH})"
        )
    if len(parts) < 2 or len(parts) > MAX_DEPTH + 1 or not all(is_name(p) for p in parts):
        raise UsageError(
            f"{_shown(text)} is not a guest address; write LAB/GUEST (e.g. basic/vm1, "
            "nested/l1/l2) with names of lower-case letters, digits and dashes"
        )
    return parts[0], tuple(parts[1:])
