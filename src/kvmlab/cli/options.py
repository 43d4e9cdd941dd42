"""Option values every command checks alike."""

from __future__ import annotations

import typer


def output_choice(value: str, *choices: str) -> str:
    """The ``-o/--output`` value, checked against what the command can print (a long or
    unprintable value is shown shortened and escaped)."""
    if value not in choices:
        listed = f"{', '.join(choices[:-1])} or {choices[-1]}"
        from kvmlab.spec.units import quoted  # (loads pydantic: only for a bad value)

        raise typer.BadParameter(f"choose {listed} (got {quoted(value)})", param_hint="--output")
    return value
