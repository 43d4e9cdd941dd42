"""``kvmlab``: entry point, sub-commands and the one place errors become exit codes.

Heavy modules are imported inside the commands so ``kvmlab --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from kvmlab import __version__
from kvmlab.cli.backend_opts import TO_HELP, BackendOpt, ConnectOpt, PersistentOpt, RootOpt
from kvmlab.cli.libvirtd_cmd import libvirtd_app
from kvmlab.cli.options import output_choice
from kvmlab.cli.tune_cmd import tune_app
from kvmlab.errors import KvmlabError, UsageError
from kvmlab.proc.signals import interrupting

PIPE_CLOSED = 141
"""Exit status when the reader of stdout went away (128 + SIGPIPE, as a shell reports it)."""


class _PipeClosed(Exception):
    """stdout's reader went away (kept apart from OSError, which typer turns into exit 1)."""


class _Group(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _PipeClosed from exc


def _output(value: str, *choices: str) -> str:
    """The ``-o/--output`` value, checked against what the command can print."""
    return output_choice(value, *choices)


app = typer.Typer(
    cls=_Group,
    name="kvmlab",
    help="Build, run, measure and debug QEMU/KVM guests and nested labs from lab files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"kvmlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
) -> None:
    """kvmlab: declarative, measured QEMU/KVM labs."""
    from kvmlab.cli.tune_cmd import restore_abandoned

    restore_abandoned(tuning=ctx.invoked_subcommand == "tune")


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
        run_explain("md" if markdown else _output(output, "text", "md", "json"))
        return
    _output(output, "text", "json")
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


@app.command()
def doctor(
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
    root: Annotated[
        Path, typer.Option("--root", help="Read the host through this directory (tests).")
    ] = Path("/"),
) -> None:
    """Check the host for virtualization, nested KVM, hugepages, IOMMU, isolation, tools."""
    from kvmlab.cli.doctor_cmd import run_doctor

    raise typer.Exit(run_doctor(_output(output, "text", "json"), root))


@app.command()
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


@app.command()
def up(
    lab: Annotated[Path, typer.Argument(help="Lab file.")],
    guest: Annotated[str | None, typer.Option("--guest", "-g", help="Only this guest.")] = None,
    within: Annotated[
        str | None,
        typer.Option("--within", hidden=True, help="Inside guest hypervisor ADDRESS: its guests."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", hidden=True, help="Same as -o json.")] = False,
    output: Annotated[
        str, typer.Option("--output", "-o", help="text (boot stages) or json (guest records).")
    ] = "text",
    variant: Annotated[
        str | None, typer.Option("--variant", help="Start this variant of the lab.")
    ] = None,
    backend: BackendOpt = None,
    connect: ConnectOpt = None,
    persistent: PersistentOpt = None,
    qemu_as_root: RootOpt = None,
) -> None:
    """Start a lab's guests, wait for their agents, print boot stages; they keep running."""
    from kvmlab.cli.lab_cmds import run_up

    run_up(
        lab,
        guest,
        within,
        as_json or _output(output, "text", "json") == "json",
        variant,
        (backend, connect, persistent, qemu_as_root),
    )


@app.command()
def ps(
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
) -> None:
    """List running guests: pid, accelerator, uptime, host CPU% next to guest CPU%."""
    from kvmlab.cli.ps_cmd import run_ps

    run_ps(_output(output, "text", "json"))


@app.command()
def exits(
    address: Annotated[
        str | None, typer.Argument(help="LAB/GUEST at any level, e.g. nested/l1/l2.")
    ] = None,
    seconds: Annotated[
        float | None,
        typer.Option(
            "--seconds",
            "-s",
            help="Length of the window (default 10; with --import: "
            "the window perf measured, required).",
        ),
    ] = None,
    provider: Annotated[
        str, typer.Option("--provider", help="auto, tracepoints, counters or perf.")
    ] = "auto",
    live: Annotated[bool, typer.Option("--live", help="Refresh each window until Ctrl-C.")] = False,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
    host_side_only: Annotated[bool, typer.Option("--host-side-only", hidden=True)] = False,
    compare: Annotated[
        Path | None,
        typer.Option("--compare", help="Lab file with variants: boot each, profile --guest."),
    ] = None,
    guest: Annotated[str | None, typer.Option("--guest", help="With --compare: l1/idle.")] = None,
    settle: Annotated[
        float | None,
        typer.Option("--settle", help="With --compare: seconds idle before profiling (10)."),
    ] = None,
    import_: Annotated[
        Path | None,
        typer.Option(
            "--import",
            help="perf kvm stat report text or perf.data; --seconds: "
            "its window (perf kvm stat live: 1).",
        ),
    ] = None,
) -> None:
    """VM-exit profile of a running guest: exits by reason with handling times, per vCPU,
    port I/O, MSR and MMIO exits named, and host CPU against guest CPU for the window.

    Taken where the guest's KVM runs (inside its guest hypervisor for a nested guest), with
    the best provider there: kernel tracepoints, else KVM's counters (query-stats).
    """
    from kvmlab.cli.exits_cmds import DEFAULT_SECONDS, check_provider, refuse_with

    output = _output(output, "text", "json")
    provider = check_provider(provider)
    if import_ is not None:
        from kvmlab.cli.exits_cmds import run_import

        refuse_with(
            "--import",
            {
                "--compare": compare is not None,
                "--live": live,
                "--provider": provider != "auto",
                "--guest": guest is not None,
                "--settle": settle is not None,
                "--host-side-only": host_side_only,
            },
        )
        run_import(import_, address, seconds, output)
        return
    if compare is not None:
        from kvmlab.cli.diagnose_cmds import run_compare

        refuse_with(
            "--compare LAB_FILE",
            {
                "address (it boots the lab)": address is not None,
                "--live": live,
                "--host-side-only": host_side_only,
            },
        )
        if guest is None:
            raise UsageError(
                "--compare LAB_FILE needs --guest PATH: the guest to profile in "
                "each variant (e.g. l1/idle)"
            )
        run_compare(
            compare,
            guest,
            DEFAULT_SECONDS if seconds is None else seconds,
            10.0 if settle is None else settle,
            output,
            provider,
        )
        return
    if guest is not None or settle is not None:
        raise UsageError("--guest and --settle go with --compare LAB_FILE")
    if address is None:
        raise UsageError(
            "give the guest's address (LAB/GUEST), --import FILE or --compare LAB_FILE"
        )
    from kvmlab.cli.exits_cmds import run_exits

    run_exits(
        address,
        DEFAULT_SECONDS if seconds is None else seconds,
        provider,
        live,
        output,
        not host_side_only,
    )


@app.command()
def diagnose(
    address: Annotated[str | None, typer.Argument(help="LAB/GUEST at any level.")] = None,
    seconds: Annotated[
        float | None,
        typer.Option(
            "--seconds",
            "-s",
            help="Length of the window (default 10; with --import: "
            "the window perf measured, required).",
        ),
    ] = None,
    provider: Annotated[
        str, typer.Option("--provider", help="auto, tracepoints, counters or perf.")
    ] = "auto",
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Write the lab with the fix of the first finding that has a lab-file fix.",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="With --apply: the new lab file (must not exist).")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
    import_: Annotated[
        Path | None,
        typer.Option(
            "--import",
            help="Diagnose a perf kvm stat report or perf.data instead; --seconds: its window.",
        ),
    ] = None,
) -> None:
    """Turn a guest's exit profile into findings: the cause, the numbers that matched, the fix
    as a lab-file change (with its QEMU and libvirt forms) or host steps, and what to verify.
    """
    from kvmlab.cli.diagnose_cmds import run_diagnose
    from kvmlab.cli.exits_cmds import check_provider, refuse_with

    output = _output(output, "text", "json")
    provider = check_provider(provider)
    if (address is None) == (import_ is None):
        raise UsageError("give the guest's address (LAB/GUEST) or --import FILE")
    if import_ is not None:
        refuse_with(
            "--import",
            {
                "--apply (it needs a running guest of a lab)": apply,
                "--out": out is not None,
                "--provider": provider != "auto",
            },
        )
    if out is not None and not apply:
        raise UsageError("--out names the lab file --apply writes; give --apply too")
    run_diagnose(address or "", import_, seconds, provider, output, apply, out)


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
            help="Same as --mode auto: precopy, then postcopy if it does not converge "
            "within the bulk copy and one pass at --downtime-limit (default 50 ms).",
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
        return run_compare(lab, variant, reps, html, _output(output, "text", "json"))
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
    return run_migrate(options, _output(output, "text", "json"))


@app.command(name="exec", context_settings={"ignore_unknown_options": True})
def exec_(
    address: Annotated[str, typer.Argument(help="LAB/GUEST, e.g. basic/vm1.")],
    command: Annotated[list[str] | None, typer.Argument(help="Command and arguments.")] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds it may run, then it is killed.")
    ] = 600.0,
) -> None:
    """Run a command in a guest (argv, through the guest agent); exit with its code.

    Like ssh: stdin is forwarded unless it is a terminal (whole, at most 47 MiB); Ctrl-C
    kills the command; its output (at most 16 MiB per stream) comes when it has ended.
    """
    from kvmlab.cli.exec_cmds import run_exec

    raise typer.Exit(run_exec(address, command or [], timeout))


@app.command()
def console(address: Annotated[str, typer.Argument(help="LAB/GUEST.")]) -> None:
    """Attach to a guest's serial console (Ctrl-] detaches); the log is in its run dir."""
    from kvmlab.cli.exec_cmds import run_console

    run_console(address)


@app.command()
def down(
    lab: Annotated[str, typer.Argument(help="Lab name (as in kvmlab ps).")],
    force: Annotated[bool, typer.Option("--force", help="Kill without a graceful stop.")] = False,
) -> None:
    """Stop a lab's guests (gracefully, then by force) and remove everything kvmlab created."""
    from kvmlab.cli.lab_cmds import run_down

    run_down(lab, force)


VariantsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--variant",
        help="Measure this variant (repeatable; default is the lab as written). "
        "Without it: the lab as written, then every variant.",
    ),
]


@app.command()
def bench(
    lab: Annotated[Path, typer.Argument(help="Lab file.")],
    suite: Annotated[str, typer.Option("--suite", help="quick or full.")] = "quick",
    levels: Annotated[str, typer.Option("--levels", help="Levels to measure: L0,L1.")] = "L0,L1",
    only: Annotated[
        str | None, typer.Option("--only", help="Workloads, e.g. cpu,disk (default: suite's).")
    ] = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="text (the level table) or json (the report).")
    ] = "text",
    backend: BackendOpt = None,
    connect: ConnectOpt = None,
    persistent: PersistentOpt = None,
    qemu_as_root: RootOpt = None,
    variant: VariantsOpt = None,
) -> None:
    """Run the benchmark suite at L0 and in the lab's guests; store and print the level table.

    The lab as written is measured, then each of its variants beside it (--variant: those).
    A workload skipped at a level asked for leaves the run incomplete (exit 3)."""
    from kvmlab.cli.bench_cmds import run_bench_cmd

    run_bench_cmd(
        lab,
        suite,
        levels,
        only,
        output=_output(output, "text", "json"),
        backend_opts=(backend, connect, persistent, qemu_as_root),
        variants=variant or (),
    )


@app.command(name="run")
def run_lab(
    lab: Annotated[
        Path | None, typer.Argument(help="Lab file (default: the embedded nested lab).")
    ] = None,
    suite: Annotated[str, typer.Option("--suite", help="quick or full.")] = "quick",
    levels: Annotated[
        str | None, typer.Option("--levels", help="Levels to measure (default: all the lab has).")
    ] = None,
    only: Annotated[
        str | None, typer.Option("--only", help="Workloads, e.g. cpu,disk (default: suite's).")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="HTML report file.")] = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="text (the level table) or json (the report).")
    ] = "text",
    backend: BackendOpt = None,
    connect: ConnectOpt = None,
    persistent: PersistentOpt = None,
    qemu_as_root: RootOpt = None,
    variant: VariantsOpt = None,
) -> None:
    """The main job: boot the whole lab (L1 and L2), benchmark L0/L1/L2, report, tear down."""
    from kvmlab.cli.bench_cmds import run_bench_cmd
    from kvmlab.labs import lab_path

    path = lab if lab is not None else lab_path("nested")
    html = out or Path(f"kvmlab-report-{path.stem}.html")
    run_bench_cmd(
        path,
        suite,
        levels,
        only,
        html,
        _output(output, "text", "json"),
        (backend, connect, persistent, qemu_as_root),
        variant or (),
    )


app.add_typer(tune_app, name="tune")
app.add_typer(libvirtd_app, name="libvirtd")
results_app = typer.Typer(help="Stored benchmark runs.", no_args_is_help=True)
app.add_typer(results_app, name="results")


@results_app.command("ls")
def results_ls(
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
) -> None:
    """List stored runs (newest first), complete or not."""
    from kvmlab.cli.bench_cmds import results_ls as ls

    ls(_output(output, "text", "json"))


@results_app.command("show")
def results_show(
    run: Annotated[str, typer.Argument(help="Run id or 'last'.")] = "last",
    output: Annotated[str, typer.Option("--output", "-o", help="text, md or json.")] = "text",
) -> None:
    """Print a run's level table."""
    from kvmlab.cli.bench_cmds import show_report
    from kvmlab.results.store import ResultStore

    output = _output(output, "text", "md", "json")
    with ResultStore() as store:
        show_report(store, run, None, output, None)


@results_app.command("export")
def results_export(
    run: Annotated[str, typer.Argument(help="Run id or 'last'.")] = "last",
    output: Annotated[str, typer.Option("--output", "-o", help="csv or json.")] = "csv",
    fmt: Annotated[
        str | None, typer.Option("--format", "-f", hidden=True, help="Old spelling of -o.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="File (default: stdout).")] = None,
) -> None:
    """Every sample of a run, as CSV or JSON."""
    from kvmlab.cli.bench_cmds import results_export as export

    export(run, _output(fmt or output, "csv", "json"), out)


@app.command()
def report(
    run: Annotated[str | None, typer.Argument(help="Run id (default: the last run).")] = None,
    last: Annotated[bool, typer.Option("--last", help="The newest run.")] = False,
    compare: Annotated[str | None, typer.Option("--compare", help="Another run beside it.")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text, md, html or json.")] = "text",
    out: Annotated[Path | None, typer.Option("--out", help="File (default: stdout).")] = None,
) -> None:
    """A run's level table: L0/L1/L2 and each level's change against the one below."""
    from kvmlab.cli.bench_cmds import show_report
    from kvmlab.cli.outfile import check_out
    from kvmlab.results.store import ResultStore

    output = _output(output, "text", "md", "html", "json")
    if out is not None:
        check_out(out)
    with ResultStore() as store:
        show_report(store, "last" if last or run is None else run, compare, output, out)


def main() -> None:
    """Console-script entry point: run the app, print kvmlab errors, exit with their code.

    Usage errors (bad arguments) are one line unless stderr is a terminal, exit 2; kvmlab's
    own errors are printed here, one ``kvmlab: `` line each; a closed stdout pipe ends
    quietly with :data:`PIPE_CLOSED`. rich and typer end a closed pipe with
    ``SystemExit(1)``; kvmlab itself never exits (its status 1 is returned), so that is
    what such an exit means here.
    """
    for name in ("stdout", "stderr"):  # started with it closed (>&-): write nowhere, quietly
        if getattr(sys, name) is None:
            setattr(sys, name, Path(os.devnull).open("w"))  # noqa: SIM115
    try:
        with interrupting(then_ignore=True):  # SIGTERM, SIGHUP like Ctrl-C, at any moment
            status = app(standalone_mode=False)
            sys.stdout.flush()
    except KeyboardInterrupt:
        print("kvmlab: interrupted", file=sys.stderr)
        sys.exit(130)
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRORS:
            raise
        print(f"kvmlab: cannot write the output: {exc.strerror}", file=sys.stderr)
        _quiet_exit(3)
    except KvmlabError as exc:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_exit(PIPE_CLOSED)
        for line in exc.lines():
            print(f"kvmlab: {line}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except (_PipeClosed, BrokenPipeError):
        _quiet_exit(PIPE_CLOSED)
    except SystemExit as exc:
        if exc.code == 1:
            _quiet_exit(PIPE_CLOSED)
        raise
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:
        if not any(k.__name__ == "ClickException" for k in type(exc).__mro__):
            raise
        _usage_error(exc)
    sys.exit(status if isinstance(status, int) else 0)


OUTPUT_ERRORS = {errno.ENOSPC, errno.EIO, errno.EBADF, errno.EFBIG, errno.EDQUOT}
"""Errors writing stdout (``>/dev/full``, a closed descriptor): one line, exit 3."""


def _quiet_exit(status: int) -> NoReturn:
    """Exit without Python complaining about output it can no longer flush."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(status)


def _usage_error(exc: Any) -> NoReturn:
    """A bad command line: typer's box on a terminal, else one ``kvmlab:`` line; exit 2."""
    if type(exc).__name__ != "NoArgsIsHelpError":  # that one printed the help already
        if sys.stderr.isatty():
            from typer import rich_utils

            rich_utils.rich_format_error(exc)
        else:
            message = " ".join(str(exc.format_message()).split())
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            print(f"kvmlab: {message}{hint}", file=sys.stderr)
    sys.exit(2)
