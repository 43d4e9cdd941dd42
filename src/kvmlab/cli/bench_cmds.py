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

    from kvmlab.bench.registry import Provided
    from kvmlab.cli.backend_opts import BackendOptions


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
) -> None:
    """Boot what the levels need, run the suite, store it, print the level table (or JSON).

    Everything a user gave is checked before anything runs: the lab, the suite and
    workloads, the levels against what the lab has, ``--out``, the results database, and
    that the lab is not up already. With ``-o json`` stdout holds the JSON and nothing else.
    When a level fails (or Ctrl-C arrives) after the run was stored, what was measured is
    still printed and written, marked incomplete with the failure named, after teardown;
    then the error is raised as it was, for its own exit status.
    """
    from rich.console import Console

    from kvmlab.bench.plan import plan
    from kvmlab.bench.session import lab_levels, parse_levels, run_bench
    from kvmlab.cli.backend_opts import BackendOptions, choose_backend
    from kvmlab.cli.hostinfo import host_accel, print_nested_preflight
    from kvmlab.cli.lab_cmds import image_factory, interruptible
    from kvmlab.cli.outfile import check_out
    from kvmlab.cli.progress import StageLog
    from kvmlab.runtime.lab import Launch, assert_not_up
    from kvmlab.spec import load_lab

    loaded = load_lab(lab_path)
    backend = choose_backend(loaded, backend_opts or BackendOptions())
    wanted = parse_levels(levels, loaded) if levels is not None else lab_levels(loaded)
    wanted = backend.levels(loaded, wanted, levels is not None)
    chosen = loaded.variants(variants)  # an unknown name is refused before anything runs
    planned = plan(loaded, only, wanted, backend)
    for variant in chosen.values():  # refused before L0 is measured
        backend.check(variant, start_inner="L2" in wanted)
    settings = planned.settings(suite, loaded.lab, tuple(chosen) if variants else ())
    if html is not None:
        check_out(html)
    assert_not_up(loaded.lab.name)
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    with ResultStore.writing() as store, interruptible(f"benchmarking {loaded.lab.name}"):
        if html is not None:
            check_not_results(store, html, "--out")
        host, choice = host_accel()
        facts = host_facts(choice.accel, choice.reason, choice.flavour)
        facts.update(backend.facts(loaded))
        if loaded.lab.bench.headline:
            facts[COMPARED_BY_FACT] = list(loaded.lab.bench.headline)
        if "backend" in facts:
            err.print(f"guests run through {backend.name}: {facts['backend']}", markup=False)
        what = (", ".join(settings.workloads) or "no workloads") + planned.describe(loaded.lab)
        err.print(
            f"suite {settings.suite}: {what}; "
            f"{settings.repetitions} repetitions after {settings.warmup} warm-up; "
            f"levels {', '.join(sorted(wanted))}; "
            f"accel=auto is {choice.accel} ({choice.reason})",
            markup=False,
        )
        if took := last_took(store, loaded.lab.name, settings.suite, loaded.digest):
            err.print(took, markup=False)
        if wanted & {"L1", "L2"}:
            print_nested_preflight(loaded.lab, choice, err)
        log = StageLog(err)
        timings: dict[str, float] = {}
        stored: list[int] = []
        faults: list[KvmlabError] = []
        failure: BaseException | None = None
        launch = Launch(host, image_factory(), backend, log)
        with log.live():
            try:
                run_id = run_bench(
                    loaded,
                    settings,
                    wanted,
                    store,
                    launch,
                    facts,
                    timings,
                    on_start=stored.append,
                    lab_workloads=planned.lab,
                    provided=_provided(),
                    faults=faults,
                )
            except (Exception, KeyboardInterrupt) as exc:
                if not stored:  # refused before anything was stored: nothing to report
                    raise
                run_id, failure = stored[0], exc
            finally:
                spent = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
                total = time.monotonic() - log.start
                err.print(
                    f"time spent ({total:.0f} s in all): {spent or 'nothing measured'}",
                    markup=False,
                )
        if failure is None:
            _report_run(store, run_id, output, html, err)
            if faults:
                raise faults[0]
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
) -> None:
    """Print or write a run's report (with another run beside it when comparing).

    In JSON every row carries its own run id and variant; in tables a compared run's
    columns are labelled with its run id. Rows of the database that cannot be read are
    left out of the report, then (unless ``check`` is False) named, one error line each.
    """
    from kvmlab.cli.outfile import write_out

    if out is not None:
        check_not_results(store, out, "--out")
    runs = [store.run(ref)] + ([store.run(compare)] if compare else [])
    if compare and runs[0].id == runs[1].id:
        raise UsageError(
            f"--compare {printable(compare)} is run {runs[0].id} itself; "
            "compare with another run (see kvmlab results ls)"
        )
    text = _render(store, runs, output, to_file=out is not None)
    if text is not None:
        if out is None:
            sys.stdout.write(text)
        else:
            write_out(out, text)
            print(f"wrote {printable(str(out))}", file=sys.stderr)
    if check:
        store.check()


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
    documents = [
        (r.id, variant, doc)
        for r in runs
        for variant, doc in store.documents(r.id, MIGRATION_DOCUMENT)
    ]
    summaries = _summaries(store, runs)
    if output == "json":
        from kvmlab.report.jsonout import report_json

        return report_json(runs, _tables(store, runs, summaries, False), documents) + "\n"
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
        from rich.console import Console

        from kvmlab.report.text import print_configurations, print_table

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
            if (configs := _configurations(head, rest, compare)) is not None:
                print_configurations(configs, console)
        _print_netcompare(store, runs, summaries, console)
        return buffer.getvalue() if buffer else None
    if output == "md":
        from kvmlab.report.markdown import markdown_configurations, markdown_table

        parts = []
        for _, table in tables:
            parts.append(markdown_table(table, title))
            if (configs := _configurations(head, table, compare)) is not None:
                parts.append(markdown_configurations(configs))
        return "".join(parts)
    if output == "html":
        from kvmlab.report.html import configurations_section, report_html
        from kvmlab.report.migration_html import comparison_section

        extra = [
            comparison_section(
                doc,
                f"Run {run_id}: live migrations"
                + ("" if variant == "default" else f" ({variant})"),
                f"migrations-{run_id}-{i}",
            )
            for i, (run_id, variant, doc) in enumerate(documents)
        ]
        for run_id, table in tables:
            if (configs := _configurations(head, table, compare)) is not None:
                extra.insert(
                    0,
                    configurations_section(
                        configs, f"Run {run_id}: by configuration", f"configurations-{run_id}"
                    ),
                )
        return report_html(runs, tables, title=title, extra=extra)
    raise UsageError(f"unknown report format {output!r}; choose text, md, html or json")


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
    from datetime import datetime

    from rich.console import Console

    from kvmlab.report.grid import Col, print_grid

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
    rows = []
    for r in runs:
        started = datetime.fromtimestamp(r.started).strftime("%Y-%m-%d %H:%M")
        took = f"{r.ended - r.started:.0f} s" if r.ended else "-"
        state = "complete" if r.complete else f"incomplete: {_cut_short(r)}"
        usable, odd = counts.get(r.id, (0, 0))
        samples = str(usable)
        if odd:  # left out of reports: said here too, so the counts agree
            samples += f" (+{odd} not finite)"
        rows.append([str(r.id), r.lab, r.suite, started, took, state, samples])
    columns = [
        Col("id", "right"),
        Col("lab"),
        Col("suite"),
        Col("started"),
        Col("duration", "right"),
        Col("state"),
        Col("samples", "right"),
    ]
    print_grid(console, columns, rows, title=f"runs in {store.path}")


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
