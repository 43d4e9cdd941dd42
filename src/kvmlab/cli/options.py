"""Options and arguments every command spells alike (``docs/cli.md`` documents them once):
``LAB``, ``--variant``, ``-o/--output``, and how each is checked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

LAB_HELP = "A lab file, or the name of a shipped lab (kvmlab labs lists them)."


def complete_lab(incomplete: str) -> list[str]:
    """Shell completion of ``LAB``: the shipped labs' names, and lab files here."""
    from kvmlab.labs import shipped

    names = [n for n in shipped() if n.startswith(incomplete)]
    here = Path(incomplete).parent if "/" in incomplete else Path()
    try:
        files = [str(p) for p in here.glob("*.toml") if str(p).startswith(incomplete)]
    except OSError:
        files = []
    return names + sorted(files)


LabArg = Annotated[
    str,
    typer.Argument(metavar="LAB", help=LAB_HELP, show_default=False, autocompletion=complete_lab),
]
AddressArg = Annotated[
    str,
    typer.Argument(
        metavar="LAB/GUEST", help="A running guest: LAB/GUEST, e.g. basic/vm1 or nested/l1/l2."
    ),
]
VariantOpt = Annotated[
    str | None,
    typer.Option("--variant", help="This configuration of the lab (its [variants.NAME])."),
]
VariantsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--variant",
        help="Measure this configuration (repeatable); without it: the lab as written, then "
        "every variant beside it.",
    ),
]


def lab_file(text: str) -> Path:
    """The lab file ``LAB`` names: a path, or a shipped lab's name."""
    from kvmlab.labs import find_lab

    return find_lab(text)


def output_choice(value: str, *choices: str) -> str:
    """The ``-o/--output`` value, checked against what the command can print (a long or
    unprintable value is shown shortened and escaped)."""
    if value not in choices:
        listed = f"{', '.join(choices[:-1])} or {choices[-1]}"
        from kvmlab.spec.units import quoted  # (loads pydantic: only for a bad value)

        raise typer.BadParameter(f"choose {listed} (got {quoted(value)})", param_hint="--output")
    return value


OutputOpt = Annotated[str, typer.Option("--output", "-o", help="text or json.")]
"""``-o/--output`` of a command that prints text or JSON."""
