"""The base of every lab-file model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    """A table of a lab file: unknown keys are errors; field docstrings are the reference.

    Defaults are not re-validated: a size default is already bytes, not a lab-file MiB count.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )
