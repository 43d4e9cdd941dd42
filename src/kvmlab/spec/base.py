"""The base of every lab-file model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    """A table of a lab file: unknown keys are errors; field docstrings are the reference.

    Defaults are not re-validated: a size default is already bytes, not a lab-file MiB count.
    TOML's ``nan`` and ``inf`` are refused wherever a number goes. The field docstrings are
    read by :mod:`kvmlab.spec.reference` when the reference is asked for, not by pydantic
    (its ``use_attribute_docstrings`` parses every model's source at each import).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)
