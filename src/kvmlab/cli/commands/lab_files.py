"""``kvmlab check`` and ``kvmlab render``: lab files validated, explained, rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import app
from kvmlab.cli.options import output_choice


@app.command()
def check(
    labs: Annotated[list[Path] | None, typer.Argument(help="Lab files to validate.")] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="List every lab-file key: type, default, meaning.")
    ] = False,
    output: Annotated[
        str, typer.Option("--output", "-o", help="text or json; with --explain also md.")
    ] = "text",
    markdown: Annotated[
        bool, typer.Option("--markdown", hidden=True, help="Same as --explain -o md.")
    ] = False,
) -> None:
    """Validate lab files; print one line per problem (exit 2) or a summary per lab."""
    from kvmlab.cli.spec_cmds import run_check, run_explain

    if explain:
        run_explain("md" if markdown else output_choice(output, "text", "md", "json"))
        return
    output_choice(output, "text", "json")
    if not labs:
        raise typer.BadParameter("give at least one lab file, or --explain", param_hint="LABS")
    run_check(labs, output)


@app.command()
def render(
    lab: Annotated[Path, typer.Argument(help="Lab file.")],
    guest: Annotated[
        str | None, typer.Option("--guest", "-g", help="Guest address: NAME or L1/L2.")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="qemu (command line) or libvirt (domain XML).")
    ] = "qemu",
    connect: Annotated[
        str | None,
        typer.Option("--connect", "-c", help="libvirt URI: render for the libvirt there."),
    ] = None,
    publish: Annotated[
        bool,
        typer.Option(
            "--publish",
            help="With --connect: upload the default image (and a cloud-init seed) into "
            "libvirt's pool 'kvmlab' so the printed domain starts there as printed.",
        ),
    ] = False,
) -> None:
    """Print the QEMU command line or libvirt domain XML of a lab's guests.

    What a printed domain needs that render does not make (an image libvirt's QEMU user
    cannot read, a switch, a disk) is said on stderr, one line each."""
    from kvmlab.cli.spec_cmds import run_render

    if fmt not in ("qemu", "libvirt"):
        raise typer.BadParameter("choose qemu or libvirt", param_hint="--format")
    if connect is not None and fmt != "libvirt":
        raise typer.BadParameter(
            "--connect renders libvirt XML: add --format libvirt", param_hint="--connect"
        )
    if publish and connect is None:
        raise typer.BadParameter(
            "--publish uploads to a daemon: add --connect URI", param_hint="--publish"
        )
    run_render(lab, guest, fmt, connect, publish)
