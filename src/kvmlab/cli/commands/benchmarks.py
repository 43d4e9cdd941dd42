"""``kvmlab bench``, ``run``, ``results`` and ``report``: workloads measured, stored, reported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_MEASURE, app
from kvmlab.cli.backend_opts import (
    BackendOpt,
    BackendOptions,
    ConnectOpt,
    PersistentOpt,
    RootOpt,
)
from kvmlab.cli.groups import command_group
from kvmlab.cli.options import LabArg, OutputOpt, VariantsOpt, lab_file, output_choice
from kvmlab.errors import UsageError

TableOutputOpt = Annotated[
    str, typer.Option("--output", "-o", help="text (the level table) or json (the report).")
]
SuiteOpt = Annotated[str, typer.Option("--suite", help="quick or full.")]
LevelsOpt = Annotated[
    str | None, typer.Option("--levels", help="Levels to measure (default: all the lab has).")
]
OnlyOpt = Annotated[
    str | None, typer.Option("--only", help="Workloads, e.g. cpu,disk (default: the suite's).")
]
RepsOpt = Annotated[
    str | None,
    typer.Option(
        "--reps",
        metavar="N|auto",
        help="Repetitions of each workload (default: the suite's); auto: until each metric's "
        "95% interval is within ±5%, 3 to 10 of them.",
    ),
]
InterleaveOpt = Annotated[
    bool,
    typer.Option(
        "--interleave",
        help="Alternate the configurations' repetitions (A B A B ...), each a fresh boot, so "
        "host drift hits all alike.",
    ),
]
HtmlOutOpt = Annotated[
    Path | None, typer.Option("--out", help="Also write the HTML report to this file.")
]


@app.command(rich_help_panel=PANEL_MEASURE)
def bench(
    lab: LabArg,
    suite: SuiteOpt = "quick",
    levels: LevelsOpt = None,
    only: OnlyOpt = None,
    out: HtmlOutOpt = None,
    output: TableOutputOpt = "text",
    backend: BackendOpt = None,
    connect: ConnectOpt = None,
    persistent: PersistentOpt = None,
    qemu_as_root: RootOpt = None,
    variant: VariantsOpt = None,
    reps: RepsOpt = None,
    interleave: InterleaveOpt = False,
) -> None:
    """Run the benchmark suite at L0 and in the lab's guests; store and print the level table.

    The lab as written is measured, then each of its variants beside it (--variant: those).
    A workload skipped at a level asked for leaves the run incomplete (exit 3).

    Examples: kvmlab bench basic --levels L0,L1 --only cpu; kvmlab bench nested --out r.html;
    kvmlab bench paging-matrix --levels L0,L1 --only cpu --reps 5 --interleave."""
    from kvmlab.cli.bench_cmds import run_bench_cmd

    run_bench_cmd(
        lab_file(lab),
        suite,
        levels,
        only,
        out,
        output=output_choice(output, "text", "json"),
        backend_opts=BackendOptions(backend, connect, persistent, qemu_as_root),
        variants=variant or (),
        reps=reps,
        interleave=interleave,
    )


@app.command(name="run", rich_help_panel=PANEL_MEASURE)
def run_lab(
    lab: LabArg,
    suite: SuiteOpt = "quick",
    levels: LevelsOpt = None,
    only: OnlyOpt = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="The HTML report file (default: kvmlab-report-LAB.html)."),
    ] = None,
    output: TableOutputOpt = "text",
    backend: BackendOpt = None,
    connect: ConnectOpt = None,
    persistent: PersistentOpt = None,
    qemu_as_root: RootOpt = None,
    variant: VariantsOpt = None,
    reps: RepsOpt = None,
    interleave: InterleaveOpt = False,
) -> None:
    """The whole job: boot the lab (L1 and L2), benchmark L0/L1/L2, store the run, print
    the level table, write the HTML report, tear down.

    It says first what it will run, and how long the last such run of the lab took.

    Examples: kvmlab run nested; kvmlab run paging-matrix --variant l1-shadow."""
    from kvmlab.cli.bench_cmds import run_bench_cmd

    path = lab_file(lab)
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
        reps,
        interleave,
    )


results_app = command_group("Stored benchmark runs: list them, export their samples.")
app.add_typer(results_app, name="results", rich_help_panel=PANEL_MEASURE)


@results_app.command("ls")
def results_ls(
    output: OutputOpt = "text",
) -> None:
    """List stored runs (newest first), complete or not."""
    from kvmlab.cli.bench_cmds import results_ls as ls

    ls(output_choice(output, "text", "json"))


@results_app.command("show", hidden=True, context_settings={"ignore_unknown_options": True})
def results_show(
    args: Annotated[list[str] | None, typer.Argument(hidden=True)] = None,
) -> None:
    """Old spelling of kvmlab report."""
    command = " ".join(["kvmlab report", *(args or [])])
    raise UsageError(f"a run's table is shown by {command} (results show is gone)")


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


RunArg = Annotated[
    str, typer.Argument(metavar="RUN", help="A run id or 'last' (kvmlab results ls).")
]
BaseRunOpt = Annotated[
    str | None,
    typer.Option(
        "--compare",
        metavar="BASE",
        help="A base run: beside it, and each metric's change against it with its "
        "interval and verdict.",
    ),
]
ReportOutputOpt = Annotated[
    str,
    typer.Option("--output", "-o", help="text, md, html or json; with --compare also junit."),
]
GateOpt = Annotated[
    float | None,
    typer.Option(
        "--fail-on-regression",
        metavar="PCT",
        help="With --compare: exit 6 when a metric is significantly worse than in BASE "
        "by more than PCT percent (a CI gate).",
    ),
]


@app.command(rich_help_panel=PANEL_MEASURE)
def report(
    run: RunArg = "last",
    last: Annotated[bool, typer.Option("--last", hidden=True)] = False,
    compare: BaseRunOpt = None,
    output: ReportOutputOpt = "text",
    out: Annotated[Path | None, typer.Option("--out", help="File (default: stdout).")] = None,
    fail_on_regression: GateOpt = None,
) -> None:
    """A run's level table: L0/L1/L2 and each level's change against the one below.

    Examples: kvmlab report; kvmlab report 12 --compare 9; kvmlab report -o html --out r.html;
    kvmlab report last --compare 9 --fail-on-regression 5 -o junit --out kvmlab.xml."""
    from kvmlab.cli.bench_cmds import check_gate, show_report
    from kvmlab.cli.outfile import check_out
    from kvmlab.results.store import ResultStore

    if last:
        raise UsageError("RUN is the newest run by default: kvmlab report (or kvmlab report last)")
    output = output_choice(output, "text", "md", "html", "json", *(["junit"] if compare else []))
    check_gate(compare, fail_on_regression)
    if out is not None:
        check_out(out)
    with ResultStore.reading() as store:
        show_report(store, run, compare, output, out, fail_pct=fail_on_regression)
