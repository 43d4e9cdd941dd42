"""``kvmlab doctor`` and ``kvmlab image``: the host checked, the default image built."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_HOST, app
from kvmlab.cli.options import OutputOpt, output_choice


@app.command(rich_help_panel=PANEL_HOST)
def doctor(
    output: OutputOpt = "text",
    root: Annotated[
        Path, typer.Option("--root", help="Read the host through this directory (tests).")
    ] = Path("/"),
) -> None:
    """Check the host for virtualization, nested KVM, hugepages, IOMMU, isolation, tools."""
    from kvmlab.cli.doctor_cmd import run_doctor

    raise typer.Exit(run_doctor(output_choice(output, "text", "json"), root))


@app.command(rich_help_panel=PANEL_HOST)
def image(
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Drop cached images first.")] = False,
    cloud_disk: Annotated[
        Path | None,
        typer.Option("--cloud-disk", help="Also write a Debian 12 cloud-init disk here (qcow2)."),
    ] = None,
) -> None:
    """Build (or reuse from the cache) the default guest image; optionally a cloud-init disk."""
    from kvmlab.cli.image_cmd import run_image

    run_image(rebuild, cloud_disk)
