"""``kvmlab up``, ``ps``, ``exec``, ``console``, ``down``: a lab's guests started, used, stopped."""

from __future__ import annotations

from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_LABS, app
from kvmlab.cli.backend_opts import (
    BackendOpt,
    BackendOptions,
    ConnectOpt,
    PersistentOpt,
    RootOpt,
)
from kvmlab.cli.options import AddressArg, LabArg, OutputOpt, VariantOpt, lab_file, output_choice


@app.command(rich_help_panel=PANEL_LABS)
def up(
    lab: LabArg,
    guest: Annotated[
        str | None,
        typer.Option("--guest", "-g", help="Only this guest: its path in the lab (vm1, l1)."),
    ] = None,
    within: Annotated[
        str | None,
        typer.Option("--within", hidden=True, help="Inside guest hypervisor ADDRESS: its guests."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", hidden=True, help="Same as -o json.")] = False,
    output: Annotated[
        str, typer.Option("--output", "-o", help="text (boot stages) or json (guest records).")
    ] = "text",
    variant: VariantOpt = None,
    backend: BackendOpt = None,
    connect: ConnectOpt = None,
    persistent: PersistentOpt = None,
    qemu_as_root: RootOpt = None,
) -> None:
    """Start a lab's guests, wait for their agents, print boot stages; they keep running.

    Examples: kvmlab up basic; kvmlab up nested (an L1 guest hypervisor and its L2);
    kvmlab up my-lab.toml --variant tuned."""
    from kvmlab.cli.lab_cmds import run_up

    run_up(
        lab_file(lab),
        guest,
        within,
        as_json or output_choice(output, "text", "json") == "json",
        variant,
        BackendOptions(backend, connect, persistent, qemu_as_root),
    )


@app.command(rich_help_panel=PANEL_LABS)
def ps(
    output: OutputOpt = "text",
    threads: Annotated[
        bool,
        typer.Option(
            "--threads",
            help="Also each QEMU's threads: guest, host kernel and QEMU user time (for a "
            "nested guest, measured inside its guest hypervisor).",
        ),
    ] = False,
    every: Annotated[
        bool,
        typer.Option(
            "--all",
            "-a",
            help="Also every other QEMU on this host: libvirt's domains (the system daemon's "
            "and kvmlab's private ones) and any QEMU started by hand, with the name "
            "kvmlab exits and diagnose take them by (domain:NAME, pid:N).",
        ),
    ] = False,
) -> None:
    """List running guests: pid, accelerator, uptime, host CPU% next to guest CPU%.

    Examples: kvmlab ps; kvmlab ps --all; kvmlab ps --threads -o json."""
    from kvmlab.cli.ps_cmd import run_ps

    run_ps(output_choice(output, "text", "json"), threads, every)


@app.command(
    name="exec", context_settings={"ignore_unknown_options": True}, rich_help_panel=PANEL_LABS
)
def exec_(
    address: AddressArg,
    command: Annotated[
        list[str] | None, typer.Argument(metavar="COMMAND...", help="Command and arguments.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds it may run, then it is killed.")
    ] = 600.0,
) -> None:
    """Run a command in a guest (argv, through the guest agent); exit with its code.

    Like ssh: stdin is forwarded unless it is a terminal (whole, at most 47 MiB); Ctrl-C
    kills the command; its output (at most 16 MiB per stream) comes when it has ended.

    Examples: kvmlab exec basic/vm1 -- uname -r; echo hi | kvmlab exec basic/vm1 -- cat.
    """
    from kvmlab.cli.exec_cmds import run_exec

    raise typer.Exit(run_exec(address, command or [], timeout))


@app.command(rich_help_panel=PANEL_LABS)
def console(address: AddressArg) -> None:
    """Attach to a guest's serial console (Ctrl-] detaches); the log is in its run dir."""
    from kvmlab.cli.exec_cmds import run_console

    run_console(address)


@app.command(rich_help_panel=PANEL_LABS)
def down(
    lab: Annotated[
        str,
        typer.Argument(
            metavar="LAB", help="The lab's name (as kvmlab ps shows it) or its lab file."
        ),
    ],
    force: Annotated[bool, typer.Option("--force", help="Kill without a graceful stop.")] = False,
) -> None:
    """Stop a lab's guests (gracefully, then by force) and remove everything kvmlab created."""
    from kvmlab.cli.lab_cmds import run_down

    run_down(lab, force)
