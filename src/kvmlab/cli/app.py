"""The ``kvmlab`` command group: its panels, its options and its root callback.

Commands register on :data:`app` from :mod:`kvmlab.cli.commands`; :mod:`kvmlab.cli.main` is
the entry point that turns errors into exit codes.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kvmlab import __version__
from kvmlab.cli.groups import CommandGroup

PANEL_LABS = "Labs and guests"
PANEL_MEASURE = "Measure and report"
PANEL_EXITS = "VM exits and diagnosis"
PANEL_MIGRATE = "Live migration"
PANEL_HOST = "The host"
"""The groups ``kvmlab --help`` lists its commands in."""

app = typer.Typer(
    cls=CommandGroup,
    name="kvmlab",
    help="Build, run, measure and debug QEMU/KVM guests and nested labs from lab files.",
    epilog="Start with: kvmlab doctor (the host), kvmlab labs (the shipped labs), kvmlab up "
    "basic, kvmlab exec basic/vm1 -- uname -r, kvmlab down basic. A LAB is a lab file or a "
    "shipped lab's name; LAB/GUEST a running guest. 'kvmlab COMMAND --help' has examples; "
    "docs/cli.md the conventions.",
    rich_markup_mode=None,
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
