"""``kvmlab bench``, ``kvmlab results`` and ``kvmlab report``."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, fields, replace
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from kvmlab.cli.jsonout import emit
from kvmlab.errors import KvmlabError, UsageError, printable
from kvmlab.jsondoc import envelope
from kvmlab.results.model import (
    COMPARED_BY_FACT,
    MIGRATION_DOCUMENT,
    NETCOMPARE_DOCUMENT,
    Run,
    Sample,
    Summary,
)
from kvmlab.results.store import ResultStore

if TYPE_CHECKING:
    from rich.console import Console

    from kvmlab.bench.bench_job import BenchJob, Recorded
    from kvmlab.bench.registry import Provided, Settings
    from kvmlab.cli.backend_opts import BackendOptions
    from kvmlab.cli.progress import StageLog
    from kvmlab.host.accel import AccelChoice
    from kvmlab.runtime.lab import Launch
    from kvmlab.runtime.machine import Backend


def host_facts(accel: str, reason: str, flavour: str) -> dict[str, Any]:
    """What a run records about the host it ran on."""
    from kvmlab.host.facts import cpu_info, meminfo_kb
    from kvmlab.host.probe import HostProbe
    from kvmlab.runtime.guest_kvm import describe as describe_kvm
    from kvmlab.runtime.guest_kvm import local_kvm

    probe = HostProbe(Path("/"))
    cpu = cpu_info(probe)
    try:
        qemu = subprocess.run(
            ["qemu-system-x86_64", "--version"], capture_output=True, text=True, timeout=10
        ).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        qemu = "not found"
    kvm = describe_kvm(local_kvm()) or f"no hardware KVM module ({flavour or 'none'})"
    return {
        "cpu": f"{cpu.vendor} {cpu.model}" if cpu else "unknown",
        "cpus": os.cpu_count(),
        "memory_gib": round(meminfo_kb(probe).get("MemTotal", 0) / 1024 / 1024, 1),
        "kernel": os.uname().release,
        "kvm_flavour": flavour,
        "kvm": kvm,
        "accelerator": accel,
        "accelerator_reason": reason,
        "qemu": qemu,
    }


def run_bench_cmd(
    lab_path: Path,
    suite: str,
    levels: str | None,
    only: str | None,
    html: Path | None = None,
    output: str = "text",
    backend_opts: BackendOptions | None = None,
    variants: Sequence[str] = (),
    reps: str | None = None,
    interleave: bool = False,
) -> None:
    """Boot what the levels need, run the suite, store it, print the level table (or JSON).

    Everything a user gave is checked before anything runs (lab, suite, workloads, levels,
    ``--out``, the results database, the lab not up). ``-o json``: stdout holds only JSON.
    When a level fails (or Ctrl-C arrives) after the run was stored, what was measured is
    still printed and written, marked incomplete with the failure named, after teardown;
    then the error is raised as it was, for its own exit status.
    """
    from rich.console import Console

    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.cli.lab_cmds import image_factory, interruptible
    from kvmlab.cli.progress import StageLog
    from kvmlab.runtime.lab import Launch

    job, backend = _checked_job(
        lab_path, levels, only, suite, html, backend_opts, variants, reps, interleave
    )
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    with ResultStore.writing() as store, interruptible(f"benchmarking {job.loaded.lab.name}"):
        if html is not None:
            check_not_results(store, html, "--out")
        host, choice = host_accel()
        facts = _announce(job, backend, store, choice, err)
        log = StageLog(err)
        launch = Launch(host, image_factory(), backend, log)
        recorded = _measure(job, store, launch, log, facts)
        _report_recorded(store, recorded, output, html, err)


def _reps_text(settings: Settings) -> str:
    """``3 repetitions``, or ``3-10 repetitions (until each metric is within ±5%)``."""
    if settings.interleave:
        return f"{settings.repetitions} repetitions interleaved (one per configuration a round)"
    if settings.auto_width is None:
        return f"{settings.repetitions} repetitions"
    return (
        f"3-{settings.repetitions} repetitions (until each metric's 95% interval is within "
        f"±{settings.auto_width:.0%})"
    )


def _checked_job(
    lab_path: Path,
    levels: str | None,
    only: str | None,
    suite: str,
    html: Path | None,
    backend_opts: BackendOptions | None,
    variants: Sequence[str],
    reps: str | None = None,
    interleave: bool = False,
) -> tuple[BenchJob, Backend]:
    """The job and the backend it runs on, once all a user gave is checked (``--out``
    among it) and the lab is not up already."""
    from kvmlab.bench.bench_job import plan_bench
    from kvmlab.cli.backend_opts import BackendOptions, choose_backend
    from kvmlab.cli.outfile import check_out
    from kvmlab.runtime.lab import assert_not_up
    from kvmlab.spec import load_lab

    loaded = load_lab(lab_path)
    backend = choose_backend(loaded, backend_opts or BackendOptions())
    job = plan_bench(loaded, backend, levels, only, suite, variants, reps, interleave)
    if html is not None:
        check_out(html)
    assert_not_up(loaded.lab.name)
    return job, backend


def _announce(
    job: BenchJob, backend: Backend, store: ResultStore, choice: AccelChoice, err: Console
) -> dict[str, Any]:
    """Say on stderr what the run measures, how, and how long the last one took; the
    host's facts the run records."""
    from kvmlab.cli.hostinfo import print_nested_preflight

    loaded, settings = job.loaded, job.settings
    facts = host_facts(choice.accel, choice.reason, choice.flavour)
    facts.update(backend.facts(loaded))
    if loaded.lab.bench.headline:
        facts[COMPARED_BY_FACT] = list(loaded.lab.bench.headline)
    if "backend" in facts:
        err.print(f"guests run through {backend.name}: {facts['backend']}", markup=False)
    what = (", ".join(settings.workloads) or "no workloads") + job.planned.describe(loaded.lab)
    err.print(
        f"suite {settings.suite}: {what}; "
        f"{_reps_text(settings)} after {settings.warmup} warm-up; "
        f"levels {', '.join(sorted(job.levels))}; "
        f"accel=auto is {choice.accel} ({choice.reason})",
        markup=False,
    )
    if took := last_took(store, loaded.lab.name, settings.suite, loaded.digest):
        err.print(took, markup=False)
    if job.levels & {"L1", "L2"}:
        print_nested_preflight(loaded.lab, choice, err)
    return facts


def _measure(
    job: BenchJob, store: ResultStore, launch: Launch, log: StageLog, facts: dict[str, Any]
) -> Recorded:
    """The run, with the live status on a terminal; then the time each stage took."""
    from kvmlab.bench.bench_job import run_recorded

    err = log.console
    timings: dict[str, float] = {}
    with log.live():
        try:
            return run_recorded(job, store, launch, facts, timings, _provided())
        finally:
            spent = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
            total = time.monotonic() - log.start
            err.print(
                f"time spent ({total:.0f} s in all): {spent or 'nothing measured'}",
                markup=False,
            )


def _report_recorded(
    store: ResultStore, recorded: Recorded, output: str, html: Path | None, err: Console
) -> None:
    """The run's report; then the error that cut it short, or a workload's fault."""
    run_id, failure = recorded.run_id, recorded.failure
    if failure is None:
        _report_run(store, run_id, output, html, err)
        if recorded.faults:
            raise recorded.faults[0]
        return
    try:
        _report_run(store, run_id, output, html, err)
    except KvmlabError as exc:  # the failure's own error and status come first
        err.print(f"the report of run {run_id} was not written: {exc}", markup=False)
    raise failure


def last_took(store: ResultStore, lab: str, suite: str, digest: str) -> str | None:
    """How long the newest complete run of this lab and suite took (the same lab file
    first), as a line for the user, or None when there is none."""
    runs = [
        r
        for r in store.runs()[:200]
        if r.lab == lab and r.suite == suite and r.complete and r.ended is not None
    ]
    same = [r for r in runs if r.spec_digest == digest] or runs
    if not same:
        return None
    last = same[0]
    assert last.ended is not None
    minutes = (last.ended - last.started) / 60
    which = "this lab file" if last.spec_digest == digest else f"lab {lab} (another version)"
    return (
        f"the last complete {suite} run of {which} took {minutes:.0f} min "
        f"(run {last.id}; kvmlab report {last.id} shows it)"
    )


def _report_run(
    store: ResultStore, run_id: int, output: str, html: Path | None, err: Console
) -> None:
    """After ``kvmlab bench``/``run``: the level table (or JSON), then the HTML file."""
    from kvmlab.cli.outfile import write_out

    show_report(store, str(run_id), None, output, None, check=False)
    state = "" if store.run(run_id).complete else "incomplete "
    where = f"{state}run {run_id} stored in {store.file}"
    if html is None:
        hint = f"'kvmlab report {run_id} -o html --out report.html' writes the page"
        err.print(f"{where}; {hint}", markup=False)
    else:
        write_out(html, _render_one(store, str(run_id), "html"))
        done = f"{where}\nHTML report: {printable(str(html.resolve()))}"
        print(done, file=sys.stderr if output == "json" else sys.stdout)
    store.check()  # a row of an earlier kvmlab's that could not be read: named last


def _compare_label(run: Run, variant: str) -> str:
    """The variant a compared run's columns carry: ``run 7`` (``run 7 tuned``)."""
    return f"run {run.id}" if variant == "default" else f"run {run.id} {variant}"


def _summaries(store: ResultStore, runs: list[Run]) -> dict[int, list[Summary]]:
    """Each run's samples reduced, read and summarised once for every table of a report
    (streamed from the store: only the values are held, not a million samples)."""
    from kvmlab.results.stats import summarize

    return {run.id: summarize(store.iter_samples(run.id)) for run in runs}


def _tables(
    store: ResultStore, runs: list[Run], summaries: dict[int, list[Summary]], compare: bool
) -> list[tuple[int, Any]]:
    """A level table per run, saying how many of its stored values were left out as not
    finite numbers (counted when :func:`_summaries` read them)."""
    from kvmlab.bench.registry import table_order
    from kvmlab.report.table import level_table

    tables = []
    for run in runs:
        reduced, failures = summaries[run.id], run.failures
        if compare:  # runs side by side, as variants named by run id
            reduced = [replace(s, variant=_compare_label(run, s.variant)) for s in reduced]
            failures = [replace(f, variant=_compare_label(run, f.variant)) for f in failures]
        table = level_table(reduced, failures, table_order())
        table.left_out = {run.id: store.left_out(run.id)}
        tables.append((run.id, table))
    return tables


def _merge(tables: list[tuple[int, Any]]) -> Any:
    """One level table holding the columns of every compared run."""
    from kvmlab.report.table import LevelTable

    merged = LevelTable(
        [c for _, t in tables for c in t.columns],
        [],
        [f for _, t in tables for f in t.failures],
        {run: n for _, t in tables for run, n in t.left_out.items()},
    )
    rows: dict[tuple[str, str], Any] = {}
    for _, t in tables:
        for row in t.rows:
            key = (row.workload, row.metric)
            if key not in rows:
                rows[key] = replace(row, cells=dict(row.cells))
            else:
                rows[key].cells.update(row.cells)
    merged.rows = list(rows.values())
    return merged


def _without(table: Any, workload: str) -> Any:
    """The level table without one workload's rows (printed in a table of its own)."""
    return replace(table, rows=[r for r in table.rows if r.workload != workload])


def _print_netcompare(
    store: ResultStore, runs: list[Run], summaries: dict[int, list[Summary]], console: Any
) -> None:
    """netcompare's own tables and notes, when a run has them."""
    from rich.text import Text

    from kvmlab.report.grid import print_grid
    from kvmlab.report.netcompare import grids, notes

    for run in runs:
        docs = store.documents(run.id, NETCOMPARE_DOCUMENT)
        for grid in grids(summaries[run.id], docs):
            console.print()
            print_grid(console, grid.columns, grid.rows, title=f"run {run.id}: {grid.title}")
        for line in notes(docs):
            style = "red" if "FINDING" in line else ""
            console.print(Text(printable(line), style=style), soft_wrap=True)


def show_report(
    store: ResultStore,
    ref: str,
    compare: str | None,
    output: str,
    out: Path | None,
    check: bool = True,
    fail_pct: float | None = None,
) -> None:
    """Print or write a run's report (with another run beside it when comparing: the
    base, each metric's change against it after the table, ``-o junit`` for CI, and the
    gate ``fail_pct``, checked once the report is out).

    In JSON every row carries its own run id and variant; in tables a compared run's
    columns are labelled with its run id. Rows of the database that cannot be read are
    left out of the report, then (unless ``check`` is False) named, one error line each.
    """
    from kvmlab.cli import report_compare

    if out is not None:
        check_not_results(store, out, "--out")
    runs = [store.run(ref)] + ([store.run(compare)] if compare else [])
    if compare and runs[0].id == runs[1].id:
        raise UsageError(
            f"--compare {printable(compare)} is run {runs[0].id} itself; "
            "compare with another run (see kvmlab results ls)"
        )
    result = report_compare.comparison(store, runs[0], runs[1]) if compare else None
    if result is None:
        _write(_render(store, runs, output, to_file=out is not None), out)
    else:
        _write(_compared(store, runs, output, result, fail_pct, out is not None), out)
    if check:
        store.check()
    if result is not None:
        report_compare.gate(result, fail_pct)


def _compared(
    store: ResultStore,
    runs: list[Run],
    output: str,
    result: Any,
    fail_pct: float | None,
    to_file: bool,
) -> str | None:
    """Both runs' report with the comparison after the table (text) or in it (JSON), or
    the comparison alone as JUnit XML; text for a terminal prints the table itself."""
    from kvmlab.cli import report_compare

    if output == "junit":
        return report_compare.rendered(result, "junit", fail_pct)
    text = _render(store, runs, output, to_file=to_file or output != "text")
    if text is None:  # the table went to the terminal
        return report_compare.rendered(result, "text", fail_pct)
    if output == "json":
        return report_compare.with_comparison(text, result, fail_pct)
    if output == "text":
        return text + report_compare.rendered(result, "text", fail_pct)
    return text


def _write(text: str | None, out: Path | None) -> None:
    """The report on stdout, or written to ``out``."""
    from kvmlab.cli.outfile import write_out

    if text is None:
        return
    if out is None:
        sys.stdout.write(text)
    else:
        write_out(out, text)
        print(f"wrote {printable(str(out))}", file=sys.stderr)


def check_gate(compare: str | None, fail_pct: float | None) -> None:
    """``--fail-on-regression PCT`` needs a base run and a percentage from 0 to 1000."""
    if fail_pct is None:
        return
    if compare is None:
        raise UsageError("--fail-on-regression compares with a base run: add --compare BASE")
    if not 0 <= fail_pct <= 1000 or fail_pct != fail_pct:
        raise UsageError(f"--fail-on-regression {fail_pct:g}: give a percentage from 0 to 1000")


def check_not_results(store: ResultStore, out: Path, flag: str) -> None:
    """Refuse to write a report over the results database (or its WAL files) it comes from."""
    db = store.path
    for name in (db, *(db.with_name(db.name + end) for end in ("-wal", "-shm", "-journal"))):
        same = out.absolute() == name.absolute()
        with suppress(OSError):
            same = same or out.samefile(name)
        if same:
            raise UsageError(
                f"{flag} {printable(str(out))} is the results database kvmlab reads; "
                "give another file name"
            )


def _render_one(store: ResultStore, ref: str, output: str) -> str:
    text = _render(store, [store.run(ref)], output)
    assert text is not None
    return text


def _render(store: ResultStore, runs: list[Run], output: str, to_file: bool = False) -> str | None:
    """The report as a string; ``text`` is printed instead (None) unless ``to_file``.

    Linear in what the runs hold: each run's samples are read and summarised once (n log n
    for the medians), the level table is built from the summaries, and printing it is
    rows x columns, at most :data:`kvmlab.report.table.MAX_CELLS` (250,000) in text,
    Markdown and HTML, beyond which the report is refused in favour of ``-o json`` and
    ``results export``; the HTML page draws charts for at most
    :data:`kvmlab.report.html.MAX_BARS` (5,000) values and says so when it leaves them out.
    A run of 200,000 samples reports in seconds.
    """
    compare = len(runs) > 1
    documents = _migration_documents(store, runs)
    summaries = _summaries(store, runs)
    if output == "json":
        from kvmlab.report.jsonout import report_json

        tables = _tables(store, runs, summaries, False)
        return report_json(runs, tables, documents) + "\n"
    from kvmlab.report.table import check_size

    tables = _tables(store, runs, summaries, compare)
    if compare:
        tables = [(runs[0].id, _merge(tables))]
    for _, table in tables:
        check_size(table, f"run {' vs '.join(str(r.id) for r in runs)}", str(runs[0].id))
    head = runs[0]
    state = "" if head.complete else f" (INCOMPLETE: {_cut_short(head)}; partial data)"
    title = (
        f"kvmlab run {' vs '.join(str(r.id) for r in runs)}: lab {head.lab}, "
        f"suite {head.suite}{state}"
    )
    if output == "text":
        return _render_text(store, runs, summaries, tables, title, to_file)
    if output == "md":
        return _render_md(head, tables, title, compare)
    if output == "html":
        return _render_html(runs, tables, documents, title, compare)
    raise UsageError(f"unknown report format {output!r}; choose text, md, html or json")


def _migration_documents(store: ResultStore, runs: list[Run]) -> list[tuple[int, str, Any]]:
    """The migration comparisons the runs stored: run id, variant, document."""
    return [
        (r.id, variant, doc)
        for r in runs
        for variant, doc in store.documents(r.id, MIGRATION_DOCUMENT)
    ]


def _render_text(
    store: ResultStore,
    runs: list[Run],
    summaries: dict[int, list[Summary]],
    tables: list[tuple[int, Any]],
    title: str,
    to_file: bool,
) -> str | None:
    """The text report, printed (None), or as a string when ``to_file``."""
    from rich.console import Console

    from kvmlab.report.text import print_configurations, print_table

    compare = len(runs) > 1
    buffer = io.StringIO() if to_file else None
    console = Console(file=buffer, color_system=None) if buffer else Console()
    for _, table in tables:
        rest = _without(table, NETCOMPARE_DOCUMENT)
        if rest.rows or rest.failures or not table.rows:
            print_table(rest, console, title)
        else:
            console.print(
                printable(title), soft_wrap=True, markup=False, highlight=False, emoji=False
            )
        if (configs := _configurations(runs[0], rest, compare)) is not None:
            print_configurations(configs, console)
    _print_netcompare(store, runs, summaries, console)
    return buffer.getvalue() if buffer else None


def _render_md(head: Run, tables: list[tuple[int, Any]], title: str, compare: bool) -> str:
    from kvmlab.report.markdown import markdown_configurations, markdown_table

    parts = []
    for _, table in tables:
        parts.append(markdown_table(table, title))
        if (configs := _configurations(head, table, compare)) is not None:
            parts.append(markdown_configurations(configs))
    return "".join(parts)


def _render_html(
    runs: list[Run],
    tables: list[tuple[int, Any]],
    documents: list[tuple[int, str, Any]],
    title: str,
    compare: bool,
) -> str:
    from kvmlab.report.html import configurations_section, report_html
    from kvmlab.report.migration_html import comparison_section

    extra = [
        comparison_section(
            doc,
            f"Run {run_id}: live migrations" + ("" if variant == "default" else f" ({variant})"),
            f"migrations-{run_id}-{i}",
        )
        for i, (run_id, variant, doc) in enumerate(documents)
    ]
    for run_id, table in tables:
        if (configs := _configurations(runs[0], table, compare)) is not None:
            extra.insert(
                0,
                configurations_section(
                    configs, f"Run {run_id}: by configuration", f"configurations-{run_id}"
                ),
            )
    return report_html(runs, tables, title=title, extra=extra)


def _provided() -> Provided:
    """What workloads need from the domains ``bench`` may not import: the exit profiler
    (``exits``), the migration engine with the packet-path probe (``migrate``, ``net``)."""
    from functools import partial

    from kvmlab.bench.registry import Provided
    from kvmlab.bench.workloads.exits import PROFILER
    from kvmlab.bench.workloads.migrations import MIGRATE
    from kvmlab.exits.collect import profile_guest
    from kvmlab.migrate.stored import measure
    from kvmlab.net.migration_path import packet_path

    return Provided(
        PROFILER.given(profile_guest), MIGRATE.given(partial(measure, path_probe=packet_path))
    )


def _configurations(run: Run, table: Any, compare: bool) -> Any:
    """The by-configuration tables (as in the nested-paging talk) of one run with variants
    (not for ``--compare``, whose columns are runs)."""
    from kvmlab.report.configurations import COMPARED_BY, configurations

    if compare:
        return None
    wanted = run.host.get(COMPARED_BY, [])
    return configurations(table, run.host, wanted if isinstance(wanted, list) else [])


def _cut_short(run: Run) -> str:
    """``L2 l1/l2 failed while booting`` (the first failure), or what an older run says."""
    if not run.failures:
        return "interrupted or failed" if run.ended is not None else "not finished"
    return run.failures[0].short


def results_ls(output: str) -> None:
    """List stored runs: every readable one, then (exit 3) a line per unreadable row."""
    with ResultStore.reading() as store:
        _list_runs(store, output)
        store.check()


def _list_runs(store: ResultStore, output: str) -> None:
    runs = store.runs()
    counts = store.counts()  # run -> (usable samples, values left out as not finite)
    if output == "json":
        emit(
            "runs",
            {
                "runs": [
                    {**asdict(r), "samples": usable, "not_finite": odd}
                    for r in runs
                    for usable, odd in [counts.get(r.id, (0, 0))]
                ]
            },
        )
        return
    from rich.console import Console

    from kvmlab.report.grid import print_grid

    console = Console()
    if not runs:
        empty = f"no results yet ({store.missing})" if store.missing else f"no runs in {store.file}"
        console.print(
            empty + ("" if store.missing or store.problems else " yet"),
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
        return
    rows = [_run_row(r, counts.get(r.id, (0, 0))) for r in runs]
    print_grid(console, _run_columns(), rows, title=f"runs in {store.path}")


def _run_row(r: Run, count: tuple[int, int]) -> list[str]:
    """A stored run as ``results ls`` lists it."""
    from datetime import datetime

    started = datetime.fromtimestamp(r.started).strftime("%Y-%m-%d %H:%M")
    took = f"{r.ended - r.started:.0f} s" if r.ended else "-"
    state = "complete" if r.complete else f"incomplete: {_cut_short(r)}"
    usable, odd = count
    samples = str(usable)
    if odd:  # left out of reports: said here too, so the counts agree
        samples += f" (+{odd} not finite)"
    return [str(r.id), r.lab, r.suite, started, took, state, samples]


def _run_columns() -> list[Any]:
    from kvmlab.report.grid import Col

    return [
        Col("id", "right"),
        Col("lab"),
        Col("suite"),
        Col("started"),
        Col("duration", "right"),
        Col("state"),
        Col("samples", "right"),
    ]


def results_export(ref: str, fmt: str, out: Path | None) -> None:
    """Every sample of a run as CSV or JSON, streamed: read a page of rows at a time and
    written as read (to stdout, or to ``--out`` through a temporary file renamed at the
    end), so a run of millions of samples never sits whole in memory.

    JSON keeps every value as stored (its escapes keep control characters off a terminal).
    CSV is what a spreadsheet opens, so a text cell is made harmless there and on a
    terminal: control characters are escaped as the text report prints them (``\\x1b``,
    ``\\n``), and a text starting with ``=``, ``+``, ``-`` or ``@`` (a formula to a
    spreadsheet) gets a ``'`` before it, which spreadsheets read as "text". kvmlab's own names
    never start so; only a value written outside kvmlab does. Numbers are left as they are.
    A stored value that is not a finite number is left out: JSON's ``not_finite`` says how
    many, and a line on stderr says so for either format.
    """
    from kvmlab.cli.outfile import check_out

    if fmt not in ("csv", "json"):
        raise UsageError(f"unknown export format {printable(repr(fmt))}; choose csv or json")
    if out is not None:
        check_out(out)
    with ResultStore.reading() as store:
        if out is not None:
            check_not_results(store, out, "--out")
        run = store.run(ref)
        with _export_file(out) as file:
            (_export_json if fmt == "json" else _export_csv)(store, run, file)
        if out is not None:
            print(f"wrote {printable(str(out))}", file=sys.stderr)
        if left := store.left_out(run.id):
            from kvmlab.report.table import left_out_note

            print(f"note: {left_out_note(run.id, left)}", file=sys.stderr)
        store.check()


@contextmanager
def _export_file(out: Path | None) -> Iterator[TextIO]:
    """stdout, or ``--out`` (a temporary file renamed over it once all was written)."""
    if out is None:
        yield sys.stdout
        return
    from kvmlab.cli.outfile import open_out

    with open_out(out) as file:
        yield file


def _export_csv(store: ResultStore, run: Run, file: TextIO) -> None:
    writer = csv.writer(file)
    names = [f.name for f in fields(Sample)]
    writer.writerow(["run", *names])
    for s in store.iter_samples(run.id):
        writer.writerow([run.id, *(csv_cell(getattr(s, n)) for n in names)])


def _export_json(store: ResultStore, run: Run, file: TextIO) -> None:
    """The ``kvmlab.samples/1`` document, byte for byte what ``json.dumps(doc, indent=2)``
    makes of it, written a sample at a time; ``not_finite`` last (known once all is read)."""
    head = json.dumps(envelope("samples", {"run": asdict(run)}), indent=2)
    file.write(head.removesuffix("\n}") + ',\n  "samples": [')
    keys = [f"\n      {json.dumps(f.name)}: " for f in fields(Sample)]
    names = [f.name for f in fields(Sample)]
    sep = "\n    "
    for s in store.iter_samples(run.id):
        values = (_json_scalar(getattr(s, n)) for n in names)
        file.write(
            sep + "{" + ",".join(k + v for k, v in zip(keys, values, strict=True)) + "\n    }"
        )
        sep = ",\n    "
    close = "]" if sep == "\n    " else "\n  ]"
    file.write(f'{close},\n  "not_finite": {store.left_out(run.id)}\n}}\n')


def _json_scalar(value: object) -> str:
    """A sample's field as ``json.dumps`` writes it (a string, a bool, an int, a float)."""
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)
    return json.dumps(value)


FORMULA_STARTS = ("=", "+", "-", "@")
"""What makes a spreadsheet read a CSV cell as a formula (tab and CR are escaped anyway)."""


def csv_cell(value: object) -> object:
    """A CSV cell: text with control characters escaped and a formula start defused."""
    if not isinstance(value, str):
        return value
    text = value if value.isprintable() else printable(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text
