"""A package's names loaded on first use (PEP 562): its ``__init__`` imports nothing heavy,
so a command that never needs the lab models or the renderers never pays for them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """The package's module ``__getattr__``: ``name`` from its module in ``where`` (a module
    of ``package``), imported now and kept in ``namespace`` (the package's globals)."""

    def attribute(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return attribute
