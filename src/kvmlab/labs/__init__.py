"""The lab files shipped with kvmlab (also at ``labs/`` in the source tree), and how a lab
is named on the command line: a lab file's path, or a shipped lab's name, from any
directory."""

from __future__ import annotations

import re
from pathlib import Path

from kvmlab.errors import UsageError, printable

HERE = Path(__file__).resolve().parent
_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")


def lab_path(name: str) -> Path:
    """The shipped lab ``name`` (``nested``, ``basic``, ...)."""
    return HERE / f"{name}.toml"


def shipped() -> list[str]:
    """The names of the shipped labs, sorted."""
    return sorted(p.stem for p in HERE.glob("*.toml") if _NAME.fullmatch(p.stem))


def find_lab(text: str) -> Path:
    """The lab file ``text`` names: a path to a lab file (as given, when it exists or
    looks like one: it ends in ``.toml`` or holds a ``/``), else a shipped lab's name.
    A name that is neither is a :class:`UsageError` that lists the shipped labs."""
    path = Path(text)
    if path.exists() or text.endswith(".toml") or "/" in text:
        return path
    if _NAME.fullmatch(text) and lab_path(text).is_file():
        return lab_path(text)
    shown = printable(text if len(text) <= 40 else text[:37] + "...")
    names = shipped()
    close = [n for n in names if n.startswith(text[:3])] or names[:6]
    raise UsageError(
        f"{shown!r} is neither a lab file nor a lab shipped with kvmlab (such as "
        f"{', '.join(close)}); 'kvmlab labs' lists them"
    )
