"""How kvmlab's commands are parsed and helped: plain help, commands listed by panel, an
option's value named (``FILE``) instead of its type, and another tool's word answered with
kvmlab's (``stop``: down)."""

from __future__ import annotations

import copy
from difflib import get_close_matches
from typing import Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption


class PipeClosed(Exception):
    """stdout's reader went away (kept apart from OSError, which typer turns into exit 1)."""


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


class CommandGroup(TyperGroup):
    """kvmlab's command groups: plain help with the commands listed by panel."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """One section per panel ("Labs and guests"), each command with its first
        paragraph whole (click would cut it at the terminal's width)."""
        panels: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            first = (command.short_help or command.help or "").split("\n\n")[0]
            panel = getattr(command, "rich_help_panel", None) or "Commands"
            panels.setdefault(panel, []).append((name, " ".join(first.split())))
        width = max((len(name) for rows in panels.values() for name, _ in rows), default=0)
        for panel, rows in panels.items():
            with formatter.section(panel):  # names padded alike: one column across panels
                formatter.write_dl([(name.ljust(width), text) for name, text in rows])

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


def _metavar(param: TyperOption, ctx: Any) -> str:
    """What help shows after an option: nothing for a flag, else its metavar (``FILE``,
    ``FORMAT``), never a Python type name."""
    if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
        return ""
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


def _untyped_argument_init(self: TyperArgument, *args: Any, **kwargs: Any) -> None:
    """An argument's help shows its name only: its type's metavar (``<str>``) is blank."""
    _argument_init(self, *args, **kwargs)
    self.type = copy.copy(self.type)
    self.type.get_metavar = lambda param, ctx: ""  # type: ignore[method-assign]


_argument_init = TyperArgument.__init__
TyperArgument.__init__ = _untyped_argument_init  # type: ignore[method-assign]
TyperOption.make_metavar = _metavar  # type: ignore[method-assign,assignment]


def command_group(help: str) -> typer.Typer:
    """A group of subcommands (``kvmlab libvirtd start``), helped like the top level."""
    return typer.Typer(cls=CommandGroup, help=help, rich_markup_mode=None, no_args_is_help=True)
