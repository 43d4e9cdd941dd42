"""``kvmlab migrate``: live-migrate a running guest, measure it, verify it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kvmlab.cli.lab_cmds import interruptible
from kvmlab.cli.progress import lines
from kvmlab.errors import UsageError, printable

EXIT_NOT_COMPLETED = 3
"""The migration failed or was cancelled; the source kept running (and was verified)."""
EXIT_CORRUPTED = 5
"""The migration completed but the guest failed verification on the destination."""


@dataclass(frozen=True)
class MigrateOptions:
    """``kvmlab migrate LAB/GUEST``'s options as typed, by name (checked by :meth:`checked`)."""

    address: str
    mode: str = "precopy"
    downtime_limit_ms: int | None = None
    bandwidth_mibs: float | None = None
    dirty_mib: int = 128
    dirty_rate_mibs: float = 20.0
    multifd_channels: int | None = None
    max_seconds: float = 300.0
    on_timeout: str = "cancel"
    postcopy_after_pass: int = 1
    dest_qemu: str | None = None
    transport: str = "tcp"
    to: str | None = None
    """A libvirt guest: the destination daemon's URI."""

    def checked(self) -> MigrateOptions:
        """These options, or a :class:`UsageError` naming the first that is out of range."""
        if not 1 <= self.dirty_mib <= 1 << 20:
            raise UsageError("--dirty-mem must be 1..1048576 MiB")
        if not 0 <= self.dirty_rate_mibs <= 1e6:
            raise UsageError("--dirty must be 0 (as fast as possible) .. 1000000 MiB/s")
        if not 1 <= self.postcopy_after_pass <= 1000:
            raise UsageError("--postcopy-after must be 1..1000 passes")
        if self.to is not None and (self.dest_qemu is not None or self.transport != "tcp"):
            raise UsageError(
                "--qemu and --transport are kvmlab's own migrations; with --to libvirt chooses both"
            )
        if self.dest_qemu is not None and not self.dest_qemu.startswith("/"):
            raise UsageError("--qemu must be an absolute path to a qemu-system binary")
        return self


def run_migrate(options: MigrateOptions, output: str) -> int:
    """Migrate ``options.address``; print the outcome; the exit status says how it ended."""
    from kvmlab.migrate.engine import migrate
    from kvmlab.migrate.modes import Settings
    from kvmlab.migrate.result import text
    from kvmlab.migrate.transports.base import Route
    from kvmlab.migrate.workload import Workload
    from kvmlab.net.migration_path import packet_path

    opts = options.checked()
    settings = Settings(
        mode=opts.mode,
        downtime_limit_ms=opts.downtime_limit_ms,
        bandwidth_mibs=opts.bandwidth_mibs,
        multifd_channels=opts.multifd_channels,
        postcopy_after_pass=opts.postcopy_after_pass,
        max_seconds=opts.max_seconds,
        on_timeout=opts.on_timeout,
    )
    workload = Workload(opts.dirty_mib, opts.dirty_rate_mibs)
    address = opts.address
    progress = lines("kvmlab: ", details=True)
    with interruptible(f"migrating {address}"):
        route = Route(to_uri=opts.to, dest_qemu=opts.dest_qemu, channel=opts.transport)
        reason = None
        if settings.mode == "auto":
            from kvmlab.migrate.stored import auto_by_hand

            settings, reason = auto_by_hand(address, settings, workload, route)
        outcome = migrate(
            address,
            settings,
            workload,
            progress,
            route,
            auto_reason=reason,
            path_probe=packet_path,
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
    from kvmlab.cli.backend_opts import lab_backend

    with lab_backend(loaded) as backend:
        if not backend.capabilities.migrate_lab:
            raise backend.refusal(loaded, "migrate LAB")
    if variant is not None:
        loaded = loaded.variant_named(variant)
    if not loaded.lab.migrations:
        raise UsageError(f"{lab_path} declares no [[migrations]]")
    host, _ = host_accel()
    progress = lines("kvmlab: ", details=True)
    with interruptible(f"comparing the migrations of {loaded.lab.name}"):
        from kvmlab.net.migration_path import packet_path

        strategies = run_migrations(
            loaded, host, image_factory(), reps, progress, path_probe=packet_path
        )
    doc = to_json(strategies)
    if html is not None:
        write_out(html, migration_html(doc, loaded.lab.name))
        progress.step(f"wrote {printable(str(html))}")
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
