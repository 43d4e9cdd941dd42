"""The ``kvmlab`` command group: its options, its root callback, and the pipe guard.

Commands register on :data:`app` from :mod:`kvmlab.cli.commands`; :mod:`kvmlab.cli.main` is
the entry point that turns errors into exit codes.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kvmlab import __version__


class PipeClosed(Exception):
    """stdout's reader went away (kept apart from OSError, which typer turns into exit 1)."""


class _Group(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise PipeClosed from exc


app = typer.Typer(
    cls=_Group,
    name="kvmlab",
    help="Build, run, measure and debug QEMU/KVM guests and nested labs from lab files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"kvmlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
) -> None:
    """kvmlab: declarative, measured QEMU/KVM labs."""
    from kvmlab.cli.tune_cmd import restore_abandoned

    restore_abandoned(tuning=ctx.invoked_subcommand == "tune")
