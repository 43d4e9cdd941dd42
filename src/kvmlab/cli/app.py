"""The ``kvmlab`` command group: its options, its root callback, and the pipe guard.

Commands register on :data:`app` from :mod:`kvmlab.cli.commands`; :mod:`kvmlab.cli.main` is
the entry point that turns errors into exit codes.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from kvmlab import __version__


class PipeClosed(Exception):
    """stdout's reader went away (kept apart from OSError, which typer turns into exit 1)."""


PANEL_LABS = "Labs and guests"
PANEL_MEASURE = "Measure and report"
PANEL_EXITS = "VM exits and diagnosis"
PANEL_MIGRATE = "Live migration"
PANEL_HOST = "The host"
"""The groups ``kvmlab --help`` lists its commands in."""

SYNONYMS = {
    "list": "ps (running guests), labs (shipped labs) or results ls (stored runs)",
    "ls": "ps (running guests), labs (shipped labs) or results ls (stored runs)",
    "status": "ps",
    "start": "up",
    "create": "up",
    "boot": "up",
    "stop": "down",
    "destroy": "down",
    "delete": "down",
    "rm": "down",
    "validate": "check",
    "lint": "check",
    "show": "report",
    "ssh": "exec (a command) or console (the serial console)",
    "shell": "exec (a command) or console (the serial console)",
    "info": "doctor (the host) or ps (the guests)",
    "profile": "exits",
    "stat": "exits",
    "benchmark": "bench (measure a lab that is up or not) or run (the whole job)",
}
"""Words users type from other tools, and the kvmlab command that does it."""


class _Group(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise PipeClosed from exc

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """typer's did-you-mean for misspellings, and kvmlab's command for another tool's
        word (``stop``: down)."""
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:
            message = getattr(exc, "message", None)
            if not isinstance(message, str) or not args or "Did you" in message:
                raise
            word = args[0]
            close = word if word in SYNONYMS else next(iter(get_close_matches(word, SYNONYMS)), "")
            if close:
                exc.message = f"{message.rstrip('.')}. Did you mean {SYNONYMS[close]}?"  # type: ignore[attr-defined]
            raise


def _metavar(param: Any, ctx: Any) -> str | None:
    """What help shows after an option or argument: nothing for a flag, else its metavar
    (``FILE``, ``FORMAT``), never a Python type name."""
    if isinstance(param, TyperArgument):  # its metavar is its name column already
        return None
    if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
        return None
    if param.metavar:
        return str(param.metavar)
    long: str | None
    long = next((str(o) for o in getattr(param, "opts", []) if str(o).startswith("--")), None)
    if long is not None:
        return METAVARS.get(long, long.lstrip("-").upper().replace("-", "_"))
    return str(param.name or "").upper()


METAVARS = {
    "--output": "FORMAT",
    "--out": "FILE",
    "--variant": "NAME",
    "--guest": "PATH",
    "--connect": "URI",
    "--to": "URI",
    "--backend": "qemu|libvirt",
    "--suite": "quick|full",
    "--levels": "L0,L1,L2",
    "--only": "WORKLOADS",
    "--seconds": "SECONDS",
    "--settle": "SECONDS",
    "--max-time": "SECONDS",
    "--timeout": "SECONDS",
    "--import": "FILE",
    "--cloud-disk": "FILE",
    "--root": "DIR",
    "--compare": "RUN",
    "--isolate": "CPUS",
    "--tcp-port": "PORT",
    "--listen": "ADDRESS",
    "--netns": "NAME",
    "--reps": "N",
    "--mode": "MODE",
    "--provider": "PROVIDER",
    "--qemu": "BINARY",
    "--dirty": "MIB_PER_S",
    "--dirty-mem": "MIB",
    "--bandwidth": "MIB_PER_S",
    "--downtime-limit": "MS",
    "--multifd-channels": "N",
    "--postcopy-after": "PASSES",
    "--on-timeout": "cancel|postcopy",
    "--transport": "tcp|unix",
    "--unmovable-irqs": "refuse|accept",
}
"""The value each option takes, as help shows it (one spelling across commands)."""

for _kind in (TyperOption, TyperArgument):
    _kind.display_type_rich = _metavar  # type: ignore[method-assign,assignment]


app = typer.Typer(
    cls=_Group,
    name="kvmlab",
    help="Build, run, measure and debug QEMU/KVM guests and nested labs from lab files.",
    epilog="Start with: kvmlab doctor (the host), kvmlab labs (the shipped labs), kvmlab up "
    "basic, kvmlab exec basic/vm1 -- uname -r, kvmlab down basic. A LAB is a lab file or a "
    "shipped lab's name; LAB/GUEST a running guest. 'kvmlab COMMAND --help' has examples; "
    "docs/cli.md the conventions.",
    rich_markup_mode="markdown",
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
