"""The one envelope of every JSON document kvmlab prints (``-o json``) or hands between its
levels: an object whose first keys are ``schema`` (``kvmlab.KIND/N``: what the rest holds,
and its version) and ``kvmlab`` (the version that wrote it), the document's own keys after.
``docs/json-output.md`` documents each kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvmlab import __version__


def schema_of(kind: str, version: int = 1) -> str:
    """``kvmlab.KIND/N``."""
    return f"kvmlab.{kind}/{version}"


def envelope(kind: str, payload: Mapping[str, Any], version: int = 1) -> dict[str, Any]:
    """``payload`` inside the envelope of ``kind`` (its own ``schema``/``kvmlab`` keys are
    replaced)."""
    rest = {k: v for k, v in payload.items() if k not in ("schema", "kvmlab")}
    return {"schema": schema_of(kind, version), "kvmlab": __version__, **rest}


def opened(data: object, kind: str, version: int = 1) -> dict[str, Any]:
    """A document read back (another kvmlab's, e.g. the one inside a guest hypervisor):
    its keys when it is an object of ``kind`` at ``version``, else ValueError saying what
    it is instead."""
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object of kind {kind}")
    found = data.get("schema")
    if found != schema_of(kind, version):
        raise ValueError(f"schema {found!r}, expected {schema_of(kind, version)!r}")
    return data
