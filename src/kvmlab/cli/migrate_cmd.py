"""``kvmlab migrate``: live-migrate a running guest, measure it, verify it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.cli.lab_cmds import interruptible
from kvmlab.cli.progress import lines
from kvmlab.errors import UsageError, printable
from kvmlab.migrate.guest_migration import EXIT_CORRUPTED

if TYPE_CHECKING:
    from kvmlab.migrate.compare import Strategy
    from kvmlab.migrate.modes import Settings
    from kvmlab.migrate.transports.base import Route
    from kvmlab.migrate.workload import Workload
    from kvmlab.spec import LoadedLab


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
    compare_pages: bool = False

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

    def settings(self) -> Settings:
        """The migration's settings (QEMU's parameters, the mode, when to give up)."""
        from kvmlab.migrate.modes import Settings

        return Settings(
            mode=self.mode,
            downtime_limit_ms=self.downtime_limit_ms,
            bandwidth_mibs=self.bandwidth_mibs,
            multifd_channels=self.multifd_channels,
            postcopy_after_pass=self.postcopy_after_pass,
            max_seconds=self.max_seconds,
            on_timeout=self.on_timeout,
            compare_pages=self.compare_pages,
        )

    def workload(self) -> Workload:
        """What the guest dirties while it migrates."""
        from kvmlab.migrate.workload import Workload

        return Workload(self.dirty_mib, self.dirty_rate_mibs)

    def route(self) -> Route:
        """Where the guest goes and how."""
        from kvmlab.migrate.transports.base import Route

        return Route(to_uri=self.to, dest_qemu=self.dest_qemu, channel=self.transport)


@dataclass(frozen=True)
class MigrateCommand:
    """``kvmlab migrate``'s options as typed, by name; :meth:`run` migrates a guest or
    compares a lab's migrations."""

    target: str | None = None
    old_lab: Path | None = None
    variant: str | None = None
    reps: int | None = None
    out: Path | None = None
    old_html: Path | None = None
    mode: str = "precopy"
    old_auto: bool = False
    downtime_limit: int | None = None
    bandwidth: float | None = None
    dirty: float = 20.0
    dirty_mem: int = 128
    multifd_channels: int | None = None
    max_time: float = 300.0
    on_timeout: str = "cancel"
    postcopy_after: int = 1
    qemu: str | None = None
    transport: str = "tcp"
    to: str | None = None
    compare_pages: bool = False
    output: str = "text"

    def run(self) -> int:
        """The exit status (see ``kvmlab migrate --help``)."""
        from kvmlab.cli.options import lab_file, output_choice

        _refuse_old(self.old_lab, self.old_html, self.old_auto)
        if self.target is None:
            raise UsageError(
                "give the guest to migrate (LAB/GUEST, as kvmlab ps shows it), or a LAB to run "
                "its [[migrations]] side by side"
            )
        if not _is_address(self.target):
            output = output_choice(self.output, "text", "json")
            return run_compare(lab_file(self.target), self.variant, self.reps, self.out, output)
        if self.variant or self.reps or self.out:
            raise UsageError("--variant, --reps and --out go with a LAB (its [[migrations]])")
        if self.compare_pages and self.to is not None:
            raise UsageError(
                "--compare-pages needs both QEMUs' RAM at the switch-over: kvmlab's own "
                "migration keeps the source paused then; libvirt's (--to) ends the source QEMU "
                "as its migration completes"
            )
        return run_migrate(self._options(self.target), output_choice(self.output, "text", "json"))

    def _options(self, address: str) -> MigrateOptions:
        return MigrateOptions(
            address=address,
            mode=self.mode,
            downtime_limit_ms=self.downtime_limit,
            bandwidth_mibs=self.bandwidth,
            dirty_mib=self.dirty_mem,
            dirty_rate_mibs=self.dirty,
            multifd_channels=self.multifd_channels,
            max_seconds=self.max_time,
            on_timeout=self.on_timeout,
            postcopy_after_pass=self.postcopy_after,
            dest_qemu=self.qemu,
            transport=self.transport,
            to=self.to,
            compare_pages=self.compare_pages,
        )


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


def run_migrate(options: MigrateOptions, output: str) -> int:
    """Migrate ``options.address``; print the outcome; the exit status says how it ended."""
    from kvmlab.migrate.guest_migration import exit_status, migrate_guest
    from kvmlab.migrate.result import text
    from kvmlab.net.migration_path import packet_path

    opts = options.checked()
    settings, workload = opts.settings(), opts.workload()
    progress = lines("kvmlab: ", details=True)
    with interruptible(f"migrating {opts.address}"):
        outcome = migrate_guest(
            opts.address, settings, workload, opts.route(), progress, packet_path
        )
    if output == "json":
        print(json.dumps(outcome.to_json(), indent=2))
    else:
        print("\n".join(text(outcome)))
    return exit_status(outcome)


def run_compare(
    lab_path: Path, variant: str | None, reps: int | None, html: Path | None, output: str
) -> int:
    """Bring the lab up, run its ``[[migrations]]`` side by side, print the comparison."""
    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.cli.lab_cmds import image_factory
    from kvmlab.cli.outfile import write_out
    from kvmlab.migrate.compare import run_migrations, to_json
    from kvmlab.report.migration_html import migration_html

    loaded = _compared_lab(lab_path, variant, reps, html)
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
        _print_comparison(strategies, loaded.lab.name)
    broken = any(o.status == "completed" and not o.verified for s in strategies for o in s.outcomes)
    return EXIT_CORRUPTED if broken else 0


def _compared_lab(
    lab_path: Path, variant: str | None, reps: int | None, html: Path | None
) -> LoadedLab:
    """The lab (``variant``: that configuration) whose migrations are compared, once all
    that was given is checked."""
    from kvmlab.cli.backend_opts import lab_backend
    from kvmlab.cli.outfile import check_out
    from kvmlab.spec import load_lab

    if reps is not None and not 1 <= reps <= 100:
        raise UsageError("--reps must be 1..100")
    if html is not None:
        check_out(html)
    loaded = load_lab(lab_path)
    with lab_backend(loaded) as backend:
        if not backend.capabilities.migrate_lab:
            raise backend.refusal(loaded, "migrate LAB")
    if variant is not None:
        loaded = loaded.variant_named(variant)
    if not loaded.lab.migrations:
        raise UsageError(f"{lab_path} declares no [[migrations]]")
    return loaded


def _print_comparison(strategies: list[Strategy], lab: str) -> None:
    from rich.console import Console

    from kvmlab.migrate.compare import table
    from kvmlab.report.grid import Col, print_grid

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
        title=f"migrations of {lab}",
        caption="median (min-max) over the verified runs",
    )
