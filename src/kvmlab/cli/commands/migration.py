"""``kvmlab migrate``: a live migration measured and verified, or a lab's side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import app
from kvmlab.cli.backend_opts import TO_HELP
from kvmlab.cli.options import output_choice
from kvmlab.errors import UsageError


@app.command()
def migrate(
    address: Annotated[
        str | None, typer.Argument(help="LAB/GUEST (a running, migratable guest).")
    ] = None,
    lab: Annotated[
        Path | None,
        typer.Option("--lab", help="Run the lab file's \\[\\[migrations]] side by side instead."),
    ] = None,
    variant: Annotated[
        str | None, typer.Option("--variant", help="--lab: the lab's variant to bring up.")
    ] = None,
    reps: Annotated[
        int | None,
        typer.Option("--reps", help="--lab: repetitions of each migration (default: its own)."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="--lab: also write the comparison as an HTML page."),
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode", help="precopy, postcopy, multifd, auto-converge, xbzrle or dirty-limit."
        ),
    ] = "precopy",
    auto: Annotated[
        bool,
        typer.Option(
            "--auto",
            help="Same as --mode auto: the strategy whose verified migrations of this guest "
            "under this workload paused it least, in the newest comparison 'kvmlab run' "
            "stored; without one, precopy, then postcopy if it does not converge within "
            "the bulk copy and one pass at --downtime-limit (default 50 ms).",
        ),
    ] = False,
    downtime_limit: Annotated[
        int | None,
        typer.Option("--downtime-limit", help="Max downtime QEMU aims for, ms (QEMU default 300)."),
    ] = None,
    bandwidth: Annotated[
        float | None, typer.Option("--bandwidth", help="Max bandwidth, MiB/s (QEMU default 128).")
    ] = None,
    dirty: Annotated[
        float,
        typer.Option(
            "--dirty",
            help="Dirtying rate in the guest, MiB/s: 20 by default, which a "
            "migration converges under even on a TCG host (0: as fast as it can, which "
            "may never converge).",
        ),
    ] = 20.0,
    dirty_mem: Annotated[
        int, typer.Option("--dirty-mem", help="Working set the guest dirties, MiB.")
    ] = 128,
    multifd_channels: Annotated[
        int | None,
        typer.Option("--multifd-channels", help="multifd: parallel channels (default 2)."),
    ] = None,
    max_time: Annotated[
        float,
        typer.Option("--max-time", help="Give up after this many seconds (see --on-timeout)."),
    ] = 300.0,
    on_timeout: Annotated[
        str, typer.Option("--on-timeout", help="cancel (the source keeps running) or postcopy.")
    ] = "cancel",
    postcopy_after: Annotated[
        int, typer.Option("--postcopy-after", help="postcopy: switch after this many passes.")
    ] = 1,
    qemu: Annotated[
        str | None,
        typer.Option("--qemu", help="Destination QEMU binary (migrate to another version)."),
    ] = None,
    transport: Annotated[str, typer.Option("--transport", help="tcp (loopback) or unix.")] = "tcp",
    to: Annotated[str | None, typer.Option("--to", help=TO_HELP)] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
) -> int:
    """Live-migrate a running guest with a dirtying workload; measure and verify it.

    Exit status: 0 migrated and verified; 3 failed or cancelled (the source kept running);
    5 completed but the guest failed verification (corrupted); 130 interrupted.
    """
    from kvmlab.cli.migrate_cmd import MigrateOptions, run_compare, run_migrate

    if lab is not None:
        if address is not None:
            raise UsageError("give LAB/GUEST or --lab FILE, not both")
        return run_compare(lab, variant, reps, html, output_choice(output, "text", "json"))
    if address is None:
        raise UsageError("give the guest to migrate (LAB/GUEST), or --lab FILE")
    if auto:
        if mode not in ("precopy", "auto"):
            raise UsageError(f"--auto chooses the mode itself; drop --mode {mode}")
        mode = "auto"
    if variant or reps or html:
        raise UsageError("--variant, --reps and --html go with --lab")
    options = MigrateOptions(
        address=address,
        mode=mode,
        downtime_limit_ms=downtime_limit,
        bandwidth_mibs=bandwidth,
        dirty_mib=dirty_mem,
        dirty_rate_mibs=dirty,
        multifd_channels=multifd_channels,
        max_seconds=max_time,
        on_timeout=on_timeout,
        postcopy_after_pass=postcopy_after,
        dest_qemu=qemu,
        transport=transport,
        to=to,
    )
    return run_migrate(options, output_choice(output, "text", "json"))
