"""Printing a JSON document on stdout, in kvmlab's one envelope (:mod:`kvmlab.jsondoc`):
``tests/test_json_envelope.py`` runs every command's JSON form against it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kvmlab.jsondoc import envelope


def emit(kind: str, payload: Mapping[str, Any], version: int = 1) -> None:
    """Print the enveloped document on stdout (indented, one trailing newline)."""
    print(json.dumps(envelope(kind, payload, version), indent=2))


def emit_document(doc: Mapping[str, Any]) -> None:
    """Print a document that carries its envelope already (made by a domain module)."""
    print(json.dumps(doc, indent=2))
