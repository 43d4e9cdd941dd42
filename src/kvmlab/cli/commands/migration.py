"""``kvmlab migrate``: a live migration measured and verified, or a lab's side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_MIGRATE, app
from kvmlab.cli.backend_opts import TO_HELP
from kvmlab.cli.options import OutputOpt

MigrateTargetArg = Annotated[
    str | None,
    typer.Argument(
        metavar="LAB/GUEST|LAB",
        help="A running, migratable guest (migrate/vm); or a LAB (file or shipped name): "
        "its [[migrations]] side by side.",
    ),
]
OldLabOpt = Annotated[Path | None, typer.Option("--lab", hidden=True)]
LabVariantOpt = Annotated[
    str | None, typer.Option("--variant", help="With a LAB: the configuration to bring up.")
]
RepsOpt = Annotated[
    int | None,
    typer.Option("--reps", help="With a LAB: repetitions of each migration (default: its own)."),
]
ComparisonOutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="With a LAB: also write the comparison as an HTML page."),
]
OldHtmlOpt = Annotated[Path | None, typer.Option("--html", hidden=True)]
ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help="precopy, postcopy, multifd, auto-converge, xbzrle, dirty-limit or auto (the "
        "strategy whose verified migrations of this guest under this workload paused it "
        "least, in the newest comparison stored; without one, precopy, then postcopy if "
        "it does not converge within the bulk copy and one pass at --downtime-limit).",
    ),
]
OldAutoOpt = Annotated[bool, typer.Option("--auto", hidden=True)]
DowntimeLimitOpt = Annotated[
    int | None,
    typer.Option("--downtime-limit", help="Max downtime QEMU aims for, ms (QEMU default 300)."),
]
BandwidthOpt = Annotated[
    float | None, typer.Option("--bandwidth", help="Max bandwidth, MiB/s (QEMU default 128).")
]
DirtyOpt = Annotated[
    float,
    typer.Option(
        "--dirty",
        help="Dirtying rate in the guest, MiB/s: 20 by default, which a "
        "migration converges under even on a TCG host (0: as fast as it can, which "
        "may never converge).",
    ),
]
DirtyMemOpt = Annotated[
    int, typer.Option("--dirty-mem", help="Working set the guest dirties, MiB.")
]
MultifdChannelsOpt = Annotated[
    int | None,
    typer.Option("--multifd-channels", help="multifd: parallel channels (default 2)."),
]
MaxTimeOpt = Annotated[
    float,
    typer.Option("--max-time", help="Give up after this many seconds (see --on-timeout)."),
]
OnTimeoutOpt = Annotated[
    str, typer.Option("--on-timeout", help="cancel (the source keeps running) or postcopy.")
]
PostcopyAfterOpt = Annotated[
    int, typer.Option("--postcopy-after", help="postcopy: switch after this many passes.")
]
QemuOpt = Annotated[
    str | None,
    typer.Option("--qemu", help="Destination QEMU binary (migrate to another version)."),
]
TransportOpt = Annotated[str, typer.Option("--transport", help="tcp (loopback) or unix.")]
ComparePagesOpt = Annotated[
    bool,
    typer.Option(
        "--compare-pages",
        help="At the switch-over, compare every page of guest RAM on both sides (the "
        "destination waits paused; the pause is reported).",
    ),
]
ToOpt = Annotated[str | None, typer.Option("--to", help=TO_HELP)]


@app.command(rich_help_panel=PANEL_MIGRATE)
def migrate(
    target: MigrateTargetArg = None,
    old_lab: OldLabOpt = None,
    variant: LabVariantOpt = None,
    reps: RepsOpt = None,
    out: ComparisonOutOpt = None,
    old_html: OldHtmlOpt = None,
    mode: ModeOpt = "precopy",
    old_auto: OldAutoOpt = False,
    downtime_limit: DowntimeLimitOpt = None,
    bandwidth: BandwidthOpt = None,
    dirty: DirtyOpt = 20.0,
    dirty_mem: DirtyMemOpt = 128,
    multifd_channels: MultifdChannelsOpt = None,
    max_time: MaxTimeOpt = 300.0,
    on_timeout: OnTimeoutOpt = "cancel",
    postcopy_after: PostcopyAfterOpt = 1,
    qemu: QemuOpt = None,
    transport: TransportOpt = "tcp",
    to: ToOpt = None,
    compare_pages: ComparePagesOpt = False,
    output: OutputOpt = "text",
) -> int:
    """Live-migrate a running guest with a dirtying workload; measure and verify it. Given a
    LAB instead, bring it up and run its [[migrations]] side by side.

    Exit status: 0 migrated and verified; 3 failed or cancelled (the source kept running);
    5 completed but the guest failed verification (corrupted); 130 interrupted.

    Examples: kvmlab migrate migrate/vm --dirty 60; kvmlab migrate migrate/vm --mode auto;
    kvmlab migrate migrate --variant one-vcpu --out migrations.html (the strategies side by
    side; one-vcpu where QEMU 7.2 runs the guests under TCG).
    """
    given = dict(locals())  # the options as typed, by name
    from kvmlab.cli.migrate_cmd import MigrateCommand

    return MigrateCommand(**given).run()
