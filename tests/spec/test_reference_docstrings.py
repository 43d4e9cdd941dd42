"""The reference reads the models' field docstrings itself (pydantic's
``use_attribute_docstrings`` parsed every model's source at each import, for every command):
it must find what pydantic found, field by field, in every model of ``kvmlab.spec``."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

PYDANTIC_SAYS = """
import importlib, json, pkgutil
import kvmlab.spec
import kvmlab.spec.base as base

base.SpecModel.model_config["use_attribute_docstrings"] = True  # before any model is built
for info in pkgutil.iter_modules(kvmlab.spec.__path__):
    importlib.import_module(f"kvmlab.spec.{info.name}")
from kvmlab.spec.reference import attribute_doc

def every(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from every(sub)

pairs = {
    f"{m.__module__}.{m.__qualname__}.{name}": [info.description or "", attribute_doc(m, name)]
    for m in set(every(base.SpecModel))
    for name, info in m.model_fields.items()
}
print(json.dumps(pairs))
"""


def test_every_field_docstring_is_the_one_pydantic_reads() -> None:
    import json

    proc = subprocess.run(
        [sys.executable, "-c", PYDANTIC_SAYS],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    pairs = json.loads(proc.stdout)
    assert len(pairs) > 100, "the models' fields were not all found"
    assert sum(1 for pydantic, _ in pairs.values() if pydantic) > 100
    differ = {key: pair for key, pair in pairs.items() if pair[0] != pair[1]}
    assert not differ, differ


def test_the_models_are_built_without_reading_their_source() -> None:
    """Importing the lab models parses no source: their fields carry no description."""
    from kvmlab.spec.lab import Guest, Lab

    assert "use_attribute_docstrings" not in Lab.model_config
    assert all(info.description is None for info in Guest.model_fields.values())
