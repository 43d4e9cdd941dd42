"""``kvmlab bench``, ``run``, ``results`` and ``report``: workloads measured, stored, reported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import app
from kvmlab.cli.backend_opts import (
    BackendOpt,
    BackendOptions,
    ConnectOpt,
    PersistentOpt,
    RootOpt,
)
from kvmlab.cli.options import output_choice

TableOutputOpt = Annotated[
    str, typer.Option("--output", "-o", help="text (the level table) or json (the report).")
]
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
    output: TableOutputOpt = "text",
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
        output=output_choice(output, "text", "json"),
        backend_opts=BackendOptions(backend, connect, persistent, qemu_as_root),
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
    output: TableOutputOpt = "text",
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
        output_choice(output, "text", "json"),
        BackendOptions(backend, connect, persistent, qemu_as_root),
        variant or (),
    )


results_app = typer.Typer(help="Stored benchmark runs.", no_args_is_help=True)
app.add_typer(results_app, name="results")


@results_app.command("ls")
def results_ls(
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
) -> None:
    """List stored runs (newest first), complete or not."""
    from kvmlab.cli.bench_cmds import results_ls as ls

    ls(output_choice(output, "text", "json"))


@results_app.command("show")
def results_show(
    run: Annotated[str, typer.Argument(help="Run id or 'last'.")] = "last",
    output: Annotated[str, typer.Option("--output", "-o", help="text, md or json.")] = "text",
) -> None:
    """Print a run's level table."""
    from kvmlab.cli.bench_cmds import show_report
    from kvmlab.results.store import ResultStore

    output = output_choice(output, "text", "md", "json")
    with ResultStore.reading() as store:
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

    export(run, output_choice(fmt or output, "csv", "json"), out)


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

    output = output_choice(output, "text", "md", "html", "json")
    if out is not None:
        check_out(out)
    with ResultStore.reading() as store:
        show_report(store, "last" if last or run is None else run, compare, output, out)
