"""``kvmlab migrate``: live-migrate a running guest, measure it, verify it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kvmlab.cli.lab_cmds import interruptible
from kvmlab.errors import UsageError

EXIT_NOT_COMPLETED = 3
"""The migration failed or was cancelled; the source kept running (and was verified)."""
EXIT_CORRUPTED = 5
"""The migration completed but the guest failed verification on the destination."""


def run_migrate(
    address: str,
    mode: str,
    downtime_limit: int | None,
    bandwidth: float | None,
    dirty_mib: int,
    dirty_rate: float,
    multifd_channels: int | None,
    max_time: float,
    on_timeout: str,
    postcopy_after: int,
    dest_qemu: str | None,
    transport: str,
    output: str,
    to: str | None = None,
) -> int:
    """Migrate ``address``; print the outcome; the exit status says how it ended."""
    from kvmlab.migrate.modes import Settings
    from kvmlab.migrate.result import text
    from kvmlab.migrate.session import Workload, migrate

    if not 1 <= dirty_mib <= 1 << 20:
        raise UsageError("--dirty-mem must be 1..1048576 MiB")
    if not 0 <= dirty_rate <= 1e6:
        raise UsageError("--dirty must be 0 (as fast as possible) .. 1000000 MiB/s")
    if not 1 <= postcopy_after <= 1000:
        raise UsageError("--postcopy-after must be 1..1000 passes")
    if to is not None and (dest_qemu is not None or transport != "tcp"):
        raise UsageError(
            "--qemu and --transport are kvmlab's own migrations; with --to libvirt chooses both"
        )
    if dest_qemu is not None and not dest_qemu.startswith("/"):
        raise UsageError("--qemu must be an absolute path to a qemu-system binary")
    settings = Settings(
        mode=mode,
        downtime_limit_ms=downtime_limit,
        bandwidth_mibs=bandwidth,
        multifd_channels=multifd_channels,
        postcopy_after_pass=postcopy_after,
        max_seconds=max_time,
        on_timeout=on_timeout,
    )

    def progress(line: str) -> None:
        print(f"kvmlab: {line}", file=sys.stderr, flush=True)

    with interruptible(f"migrating {address}"):
        if to is not None:
            from kvmlab.migrate.libvirt_migrate import migrate_libvirt

            outcome = migrate_libvirt(
                address, to, settings, Workload(dirty_mib, dirty_rate), progress
            )
        else:
            outcome = migrate(
                address, settings, Workload(dirty_mib, dirty_rate), progress, dest_qemu, transport
            )
    if output == "json":
        print(json.dumps(outcome.to_json(), indent=2))
    else:
        print("\n".join(text(outcome)))
    if outcome.interrupted:
        return 130
    if outcome.verified:
        return 0
    return EXIT_CORRUPTED if outcome.status == "completed" else EXIT_NOT_COMPLETED


def run_compare(
    lab_path: Path, variant: str | None, reps: int | None, html: Path | None, output: str
) -> int:
    """Bring the lab up, run its ``[[migrations]]`` side by side, print the comparison."""
    from rich.console import Console

    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.cli.lab_cmds import image_factory
    from kvmlab.cli.outfile import check_out, write_out
    from kvmlab.migrate.compare import run_migrations, table, to_json
    from kvmlab.report.grid import Col, print_grid
    from kvmlab.report.migration_html import migration_html
    from kvmlab.spec import load_lab

    if reps is not None and not 1 <= reps <= 100:
        raise UsageError("--reps must be 1..100")
    if html is not None:
        check_out(html)
    loaded = load_lab(lab_path)
    from kvmlab.cli.backend_opts import qemu_only

    qemu_only(loaded, "migrate")
    if variant is not None:
        loaded = loaded.variant_named(variant)
    if not loaded.lab.migrations:
        raise UsageError(f"{lab_path} declares no [[migrations]]")
    host, _ = host_accel()

    def progress(line: str) -> None:
        print(f"kvmlab: {line}", file=sys.stderr, flush=True)

    with interruptible(f"comparing the migrations of {loaded.lab.name}"):
        strategies = run_migrations(loaded, host, image_factory(), reps, progress)
    doc = to_json(strategies)
    if html is not None:
        write_out(html, migration_html(doc, loaded.lab.name), "--html")
        progress(f"wrote {html}")
    if output == "json":
        print(json.dumps(doc, indent=2))
    else:
        header, rows = table(strategies)
        columns = [
            Col(header[0]),
            Col(header[1], "right"),
            *(Col(name, "right") for name in header[2:]),
        ]
        print_grid(
            Console(),
            columns,
            rows,
            title=f"migrations of {loaded.lab.name}",
            caption="median (min-max) over the verified runs",
        )
    broken = any(o.status == "completed" and not o.verified for s in strategies for o in s.outcomes)
    return EXIT_CORRUPTED if broken else 0
