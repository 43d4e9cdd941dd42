"""``kvmlab bench``, ``kvmlab results`` and ``kvmlab report``."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kvmlab.errors import UsageError
from kvmlab.results.model import LEVELS, Run
from kvmlab.results.store import ResultStore


def host_facts(accel: str, reason: str, flavour: str) -> dict[str, Any]:
    """What a run records about the host it ran on."""
    from kvmlab.host.facts import cpu_info, meminfo_kb
    from kvmlab.host.probe import HostProbe

    probe = HostProbe(Path("/"))
    cpu = cpu_info(probe)
    try:
        qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True,
                              text=True, timeout=10).stdout.splitlines()[0]  # fmt: skip
    except (OSError, IndexError, subprocess.TimeoutExpired):
        qemu = "not found"
    return {
        "cpu": f"{cpu.vendor} {cpu.model}" if cpu else "unknown",
        "cpus": os.cpu_count(),
        "memory_gib": round(meminfo_kb(probe).get("MemTotal", 0) / 1024 / 1024, 1),
        "kernel": os.uname().release,
        "kvm_flavour": flavour,
        "accelerator": accel,
        "accelerator_reason": reason,
        "qemu": qemu,
    }


def run_bench_cmd(
    lab_path: Path, suite: str, levels: str, only: str | None, html: Path | None = None
) -> None:
    """Boot what the levels need, run the suite, store it, print the level table."""
    from rich.console import Console

    from kvmlab.bench.session import run_bench
    from kvmlab.bench.suite import settings_for
    from kvmlab.cli.hostinfo import host_accel, print_nested_preflight
    from kvmlab.cli.run_cmds import image_factory, interruptible
    from kvmlab.spec import load_lab

    loaded = load_lab(lab_path)
    wanted = {lv.strip().upper() for lv in levels.split(",") if lv.strip()}
    if not wanted or not wanted <= set(LEVELS):
        raise UsageError(f"--levels takes a list of {', '.join(LEVELS)}, got {levels!r}")
    settings = settings_for(suite, loaded.lab.bench, only.split(",") if only else None)
    host, choice = host_accel()
    err = Console(stderr=True)
    err.print(f"suite {settings.suite}: {', '.join(settings.workloads)}; "
              f"{settings.repetitions} repetitions after {settings.warmup} warm-up; "
              f"accel=auto is {choice.accel} ({choice.reason})")  # fmt: skip
    if wanted & {"L1", "L2"}:
        print_nested_preflight(loaded.lab, choice, err)
    with ResultStore() as store, interruptible(f"benchmarking {loaded.lab.name}"):
        with err.status("starting") as status:
            def progress(text: str) -> None:
                status.update(text)

            timings: dict[str, float] = {}
            started = time.monotonic()
            try:
                run_id = run_bench(
                    loaded, settings, wanted, store, host,
                    host_facts(choice.accel, choice.reason, choice.flavour), image_factory(),
                    progress, timings,
                )  # fmt: skip
            finally:
                spent = ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
                total = time.monotonic() - started
                err.print(f"time spent ({total:.0f} s in all): {spent or 'nothing measured'}")
        show_report(store, str(run_id), None, "text", None)
        if html is None:
            hint = f"'kvmlab report {run_id} -o html --out report.html' writes the page"
            err.print(f"run {run_id} stored in {store.path}; {hint}")
            return
        html.parent.mkdir(parents=True, exist_ok=True)
        show_report(store, str(run_id), None, "html", html)
        print(f"run {run_id} stored in {store.path}\nHTML report: {html.resolve()}")


def _tables(store: ResultStore, runs: list[Run]) -> list[tuple[int, Any]]:
    from kvmlab.report.table import level_table
    from kvmlab.results.stats import summarize

    tables = []
    for run in runs:
        samples = store.samples(run.id)
        if len(runs) > 1:  # compare: runs side by side, as variants
            samples = [type(s)(**{**asdict(s), "variant": f"run {run.id} {s.variant}"})
                       for s in samples]  # fmt: skip
        tables.append((run.id, level_table(summarize(samples))))
    return tables


def show_report(
    store: ResultStore, ref: str, compare: str | None, output: str, out: Path | None
) -> None:
    """Print or write a run's report (with another run beside it when comparing)."""
    from kvmlab.report.table import LevelTable

    runs = [store.run(ref)] + ([store.run(compare)] if compare else [])
    tables = _tables(store, runs)
    if compare:
        merged = LevelTable([c for _, t in tables for c in t.columns], [])
        rows: dict[tuple[str, str], Any] = {}
        for _, t in tables:
            for row in t.rows:
                rows.setdefault((row.workload, row.metric), row)
                rows[(row.workload, row.metric)].cells.update(row.cells)
        merged.rows = list(rows.values())
        tables = [(runs[0].id, merged)]
    head = runs[0]
    state = "" if head.complete else " (INCOMPLETE: interrupted or failed; partial data)"
    title = (f"kvmlab run {' vs '.join(str(r.id) for r in runs)}: lab {head.lab}, "
             f"suite {head.suite}{state}")  # fmt: skip
    text = _render(runs, tables, output, title)
    if text is None:
        return
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)


def _render(
    runs: list[Run], tables: list[tuple[int, Any]], output: str, title: str
) -> str | None:
    if output == "text":
        from rich.console import Console

        from kvmlab.report.text import print_table

        for _, table in tables:
            print_table(table, Console(), title)
        return None
    if output == "md":
        from kvmlab.report.markdown import markdown_table

        return "".join(markdown_table(t, title) for _, t in tables)
    if output == "json":
        from kvmlab.report.jsonout import report_json

        return report_json(runs, tables) + "\n"
    if output == "html":
        from kvmlab.report.html import report_html

        return report_html(runs, tables, title=title)
    raise UsageError(f"unknown report format {output!r}; choose text, md, html or json")


def results_ls(output: str) -> None:
    """List stored runs."""
    with ResultStore() as store:
        runs = store.runs()
        if output == "json":
            print(json.dumps([asdict(r) for r in runs], indent=2))
            return
        from datetime import datetime

        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"runs in {store.path}")
        for column in ("id", "lab", "suite", "started", "duration", "state", "samples"):
            table.add_column(column)
        for r in runs:
            started = datetime.fromtimestamp(r.started).strftime("%Y-%m-%d %H:%M")
            took = f"{r.ended - r.started:.0f} s" if r.ended else "-"
            state = "complete" if r.complete else "incomplete"
            table.add_row(str(r.id), r.lab, r.suite, started, took, state,
                          str(len(store.samples(r.id))))  # fmt: skip
        Console().print(table if runs else f"no runs in {store.path} yet")


def results_export(ref: str, fmt: str, out: Path | None) -> None:
    """Every sample of a run as CSV or JSON."""
    with ResultStore() as store:
        run = store.run(ref)
        samples = store.samples(run.id)
        if fmt == "json":
            text = json.dumps({"run": asdict(run), "samples": [asdict(s) for s in samples]},
                              indent=2) + "\n"  # fmt: skip
        elif fmt == "csv":
            buf = io.StringIO()
            writer = csv.writer(buf)
            fields = list(asdict(samples[0]).keys()) if samples else ["variant"]
            writer.writerow(["run", *fields])
            for s in samples:
                writer.writerow([run.id, *asdict(s).values()])
            text = buf.getvalue()
        else:
            raise UsageError(f"unknown export format {fmt!r}; choose csv or json")
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
