"""kvmlab's commands, one module per group; importing this package registers them on
:data:`kvmlab.cli.app.app`, in the order ``kvmlab --help`` lists them."""

from __future__ import annotations

import copy
import importlib
from collections.abc import Sequence

import typer
from typer.main import get_command_name

from kvmlab.cli.app import PANEL_HOST, app
from kvmlab.cli.libvirtd_cmd import libvirtd_app
from kvmlab.cli.tune_cmd import tune_app

GROUPS = ("lab_files", "labs", "benchmarks", "exits", "migration", "host")
"""The command modules, in help order (each registers its commands when imported)."""

for _group in GROUPS:
    importlib.import_module(f"{__name__}.{_group}")
app.add_typer(tune_app, name="tune", rich_help_panel=PANEL_HOST)
app.add_typer(libvirtd_app, name="libvirtd", rich_help_panel=PANEL_HOST)


def app_for(args: Sequence[str]) -> typer.Typer:
    """The app to run ``args`` with: when the first names a command, :data:`app` with that
    command alone, else the whole app (``--help``, ``--version``, a misspelt command).

    typer turns every registered command into a click command (each signature read, each
    annotation evaluated) at every start, for the one command that runs: ~13 ms on the host,
    ten times that in a guest hypervisor under TCG. The command runs exactly as in the whole
    app: the same group, callback and options, the same name in its usage line.
    """
    name = args[0] if args else ""
    commands = [c for c in app.registered_commands if _name(c) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    one = copy.copy(app)
    one.registered_commands = commands
    one.registered_groups = groups
    return one


def _name(command: typer.models.CommandInfo) -> str:
    """The name a command is run by (typer's rule: its own, else its function's)."""
    if command.name:
        return command.name
    return get_command_name(command.callback.__name__) if command.callback else ""
