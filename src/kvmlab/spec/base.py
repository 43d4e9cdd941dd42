"""The base of every lab-file model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    """A table of a lab file: unknown keys are errors; field docstrings are the reference.

    Defaults are not re-validated: a size default is already bytes, not a lab-file MiB count.
    TOML's ``nan`` and ``inf`` are refused wherever a number goes. Types are strict: a
    boolean is ``true`` or ``false`` (not ``1``, ``0`` or ``"yes"``), a whole number is a
    TOML integer (not ``true``, ``"2"`` or ``2.0``); the forms the reference promises (sizes
    such as ``"2G"``, CPU sets such as ``"0-3"``, addresses as text) are parsed by their own
    types (:mod:`kvmlab.spec.units`). The field docstrings are
    read by :mod:`kvmlab.spec.reference` when the reference is asked for, not by pydantic
    (its ``use_attribute_docstrings`` parses every model's source at each import).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, strict=True)
