"""``kvmlab migrate``: a live migration measured and verified, or a lab's side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_MIGRATE, app
from kvmlab.cli.backend_opts import TO_HELP
from kvmlab.cli.options import lab_file, output_choice
from kvmlab.errors import UsageError


@app.command(rich_help_panel=PANEL_MIGRATE)
def migrate(
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="LAB/GUEST|LAB",
            help="A running, migratable guest (migrate/vm); or a LAB (file or shipped name): "
            "its `[[migrations]]` side by side.",
        ),
    ] = None,
    old_lab: Annotated[Path | None, typer.Option("--lab", hidden=True)] = None,
    variant: Annotated[
        str | None, typer.Option("--variant", help="With a LAB: the configuration to bring up.")
    ] = None,
    reps: Annotated[
        int | None,
        typer.Option(
            "--reps", help="With a LAB: repetitions of each migration (default: its own)."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="With a LAB: also write the comparison as an HTML page."),
    ] = None,
    old_html: Annotated[Path | None, typer.Option("--html", hidden=True)] = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="precopy, postcopy, multifd, auto-converge, xbzrle, dirty-limit or auto (the "
            "strategy whose verified migrations of this guest under this workload paused it "
            "least, in the newest comparison stored; without one, precopy, then postcopy if "
            "it does not converge within the bulk copy and one pass at --downtime-limit).",
        ),
    ] = "precopy",
    old_auto: Annotated[bool, typer.Option("--auto", hidden=True)] = False,
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
    """Live-migrate a running guest with a dirtying workload; measure and verify it. Given a
    LAB instead, bring it up and run its `[[migrations]]` side by side.

    Exit status: 0 migrated and verified; 3 failed or cancelled (the source kept running);
    5 completed but the guest failed verification (corrupted); 130 interrupted.

    Examples: kvmlab migrate migrate/vm --dirty 60; kvmlab migrate migrate/vm --mode auto;
    kvmlab migrate migrate --out migrations.html (the strategies side by side).
    """
    from kvmlab.cli.migrate_cmd import MigrateOptions, run_compare, run_migrate

    _refuse_old(old_lab, old_html, old_auto)
    if target is None:
        raise UsageError(
            "give the guest to migrate (LAB/GUEST, as kvmlab ps shows it), or a LAB to run "
            "its [[migrations]] side by side"
        )
    if not _is_address(target):
        return run_compare(
            lab_file(target), variant, reps, out, output_choice(output, "text", "json")
        )
    if variant or reps or out:
        raise UsageError("--variant, --reps and --out go with a LAB (its [[migrations]])")
    options = MigrateOptions(
        address=target,
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


def _is_address(text: str) -> bool:
    """Whether ``text`` names a running guest's address (LAB/GUEST) rather than a lab: two
    or more names joined by ``/`` that are not an existing file or a ``.toml``."""
    from kvmlab.spec.names import is_name

    parts = text.split("/")
    return (
        len(parts) >= 2
        and all(is_name(p) for p in parts)
        and not text.endswith(".toml")
        and not Path(text).is_file()
    )


def _refuse_old(lab: Path | None, html: Path | None, auto: bool) -> None:
    """Spellings of an older kvmlab, each told its one spelling now."""
    if lab is not None:
        raise UsageError(f"give the lab as the argument: kvmlab migrate {lab}")
    if html is not None:
        raise UsageError(f"the HTML page is --out FILE: kvmlab migrate LAB --out {html}")
    if auto:
        raise UsageError("the automatic choice is a mode: --mode auto")
