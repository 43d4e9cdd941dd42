"""``kvmlab labs``, ``check`` and ``render``: lab files listed, validated, explained, rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_LABS, app
from kvmlab.cli.options import LabArg, OutputOpt, VariantOpt, lab_file, output_choice


@app.command(name="labs", rich_help_panel=PANEL_LABS)
def labs_(output: OutputOpt = "text") -> None:
    """List the labs shipped with kvmlab: their names (which every command takes in place
    of a lab file), what each is for, and what it needs of the host."""
    from kvmlab.cli.lab_list import print_labs

    print_labs(output_choice(output, "text", "json"))


LabsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="LAB...",
        help="Lab files or shipped labs' names; with --explain: keys to explain.",
    ),
]
ExplainOpt = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="Explain lab-file keys (every key, or those the arguments name: "
        "kvmlab check --explain nics).",
    ),
]
CheckOutputOpt = Annotated[
    str, typer.Option("--output", "-o", help="text or json; with --explain also md.")
]
MarkdownOpt = Annotated[
    bool, typer.Option("--markdown", hidden=True, help="Same as --explain -o md.")
]


@app.command(rich_help_panel=PANEL_LABS)
def check(
    labs: LabsArg = None,
    explain: ExplainOpt = False,
    variant: VariantOpt = None,
    output: CheckOutputOpt = "text",
    markdown: MarkdownOpt = False,
) -> None:
    """Validate lab files: one line per problem (exit 2), else a summary of each lab as it
    would run on this host, with warnings about what this host lacks.

    Examples: kvmlab check nested; kvmlab check my-lab.toml --variant tuned;
    kvmlab check --explain memory."""
    from kvmlab.cli.spec_cmds import run_check, run_explain

    if explain or markdown:
        run_explain("md" if markdown else output_choice(output, "text", "md", "json"), labs or [])
        return
    output_choice(output, "text", "json")
    if not labs:
        raise typer.BadParameter(
            "give at least one lab (a file, or a name from 'kvmlab labs'), or --explain",
            param_hint="LAB",
        )
    run_check([lab_file(lab) for lab in labs], output, variant)


RenderGuestOpt = Annotated[
    str | None,
    typer.Option("--guest", "-g", help="Only this guest: its path in the lab (vm1, l1/l2)."),
]
RenderOutputOpt = Annotated[
    str,
    typer.Option(
        "--output",
        "-o",
        help="qemu (the command line), libvirt (domain XML) or json (each guest's "
        "QEMU argv as a list).",
    ),
]
OldFormatOpt = Annotated[
    str | None, typer.Option("--format", "-f", hidden=True, help="Old spelling of -o.")
]
RenderConnectOpt = Annotated[
    str | None,
    typer.Option("--connect", "-c", help="libvirt URI: render for the libvirt there."),
]
PublishOpt = Annotated[
    bool,
    typer.Option(
        "--publish",
        help="With --connect: upload the default image (and a cloud-init seed) into "
        "libvirt's pool 'kvmlab' so the printed domain starts there as printed.",
    ),
]


@app.command(rich_help_panel=PANEL_LABS)
def render(
    lab: LabArg,
    guest: RenderGuestOpt = None,
    variant: VariantOpt = None,
    output: RenderOutputOpt = "qemu",
    old_format: OldFormatOpt = None,
    connect: RenderConnectOpt = None,
    publish: PublishOpt = False,
) -> None:
    """Print the QEMU command line or libvirt domain XML of a lab's guests.

    What a printed domain needs that render does not make (an image libvirt's QEMU user
    cannot read, a switch, a disk) is said on stderr, one line each.

    Examples: kvmlab render basic; kvmlab render nested --guest l1 -o libvirt > l1.xml;
    kvmlab render basic -o libvirt -c qemu:///system --publish | virsh define /dev/stdin."""
    from kvmlab.cli.spec_cmds import run_render

    fmt = output_choice(old_format or output, "qemu", "libvirt", "json")
    if connect is not None and fmt != "libvirt":
        raise typer.BadParameter(
            "--connect renders libvirt XML: add -o libvirt", param_hint="--connect"
        )
    if publish and connect is None:
        raise typer.BadParameter(
            "--publish uploads to a daemon: add --connect URI", param_hint="--publish"
        )
    run_render(lab_file(lab), guest, fmt, connect, publish, variant)


ImportSourceArg = Annotated[
    str,
    typer.Argument(
        metavar="SOURCE",
        help="A domain's XML file (virsh dumpxml), a file with a QEMU command line, - for "
        "standard input, domain:NAME (a defined libvirt domain) or pid:N (a running QEMU).",
        show_default=False,
    ),
]
ImportConnectOpt = Annotated[
    str | None,
    typer.Option(
        "--connect", "-c", help="libvirt URI of domain:NAME's daemon (default qemu:///system)."
    ),
]
BootImageOpt = Annotated[
    bool,
    typer.Option(
        "--boot-image",
        help="Boot kvmlab's own image instead of the VM's disk or kernel, attaching none of "
        "its disks: its shape, on a host without its contents.",
    ),
]
ImportOutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Write the lab file here (a new file) instead of stdout."),
]


@app.command(name="import", rich_help_panel=PANEL_LABS)
def import_(
    source: ImportSourceArg,
    connect: ImportConnectOpt = None,
    boot_image: BootImageOpt = False,
    out: ImportOutOpt = None,
) -> None:
    """Turn a VM you already have into a lab file: a libvirt domain or a QEMU command line.

    What the guest sees is carried over (CPU model, flags and topology, memory, huge pages,
    NUMA, pinning, clock and timers, Hyper-V, disks, NICs); what a lab file cannot say is
    listed in the file's comments and on stderr, never dropped silently.

    Examples: kvmlab import win10.xml --out win10.toml; kvmlab import domain:win10
    -c qemu:///system; kvmlab import pid:4242 --boot-image."""
    from kvmlab.cli.import_cmd import run_import

    run_import(source, connect, boot_image, out)
