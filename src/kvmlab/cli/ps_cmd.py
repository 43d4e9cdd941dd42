"""``kvmlab ps``: running guests with host CPU next to guest CPU."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.runtime.rundir import GuestRecord, running_labs
from kvmlab.spec.units import format_size

if TYPE_CHECKING:
    from rich.console import Console

    from kvmlab.runtime.thread_cpu import Threads

Usage = dict[int, tuple[float | None, float | None]]


def run_ps(output: str, threads: bool = False) -> None:
    """List running labs and guests with host CPU next to guest CPU (``threads``: and each
    QEMU's threads split into guest, host kernel and QEMU user time)."""
    entries = [e for lab_dir in running_labs() for e in lab_dir.entries()]
    rows = [
        (e.run_dir, e.record) for e in entries if e.record is not None and e.state() == "running"
    ]
    if threads:
        usage, seen = _with_threads(rows, lambda: _sample(rows))
    else:
        usage, seen = _sample(rows), {}
    now = time.time()
    out: list[dict[str, object]] = []
    for entry in entries:
        rec, state = entry.record, entry.state()
        pids = entry.processes()
        row: dict[str, object] = {
            "lab": entry.lab,
            "guest": "/".join(entry.address),
            "address": entry.name,
            "level": f"L{len(entry.address)}",
            "state": state,
            "pid": rec.pid if rec is not None and rec.pid else (pids[0] if pids else None),
            "problem": entry.problem,
        }
        if rec is not None:
            host_cpu, guest_cpu = usage.get(rec.pid, (None, None))
            row.update(
                {
                    "accel": rec.accel,
                    "vcpus": rec.vcpus,
                    "memory_bytes": rec.memory,
                    "uptime_s": round(now - rec.started, 1),
                    "host_cpu_pct": None if rec.via else host_cpu,
                    "guest_cpu_pct": guest_cpu,
                    "via": rec.via,
                    "boot_s": rec.boot,
                }
            )
        if threads:
            measured = seen.get(entry.name)
            row["threads"] = None if measured is None else measured.threads
            row["threads_where"] = None if measured is None else measured.where
            row["threads_problem"] = None if measured is None else measured.problem
        out.append(row)
    if output == "json":
        from kvmlab.cli.jsonout import emit

        emit("ps", {"guests": out})
        return
    if not out:
        print("no running guests")
        return
    from rich.console import Console

    from kvmlab.report.grid import Col, print_grid

    columns = [
        Col("address"),
        Col("level"),
        Col("pid", "right"),
        Col("state"),
        Col("accel"),
        Col("vCPUs", "right"),
        Col("memory", "right"),
        Col("uptime", "right"),
        Col("host CPU%", "right"),
        Col("guest CPU%", "right"),
    ]
    cells: list[list[str]] = []
    for row in out:
        known = "accel" in row
        cells.append(
            [
                str(row["address"]),
                str(row["level"]),
                str(row["pid"] or "-"),
                str(row["state"]),
                str(row["accel"]) if known else "-",
                str(row["vcpus"]) if known else "-",
                format_size(int(str(row["memory_bytes"]))) if known else "-",
                f"{row['uptime_s']:.0f} s" if known else "-",
                "-" if row.get("host_cpu_pct") is None else f"{row['host_cpu_pct']:.0f}",
                "-" if row.get("guest_cpu_pct") is None else f"{row['guest_cpu_pct']:.0f}",
            ]
        )
    for row in out:
        if row["problem"]:
            print(f"{row['address']}: {row['problem']}", file=sys.stderr)
    title = "running guests (CPU in % of one host CPU, sampled over 0.5 s)"
    console = Console()
    print_grid(console, columns, cells, title=title)
    if threads:
        _print_threads(console, out)


def _sample(rows: list[tuple[Path, GuestRecord]]) -> Usage:
    """Host and guest CPU of the running guests; with none running, what reaches their
    agents (both backends) is not even imported."""
    if not rows:
        return {}
    from kvmlab.runtime.cpu_compare import sample_usage

    return sample_usage(rows)


def _with_threads(
    rows: list[tuple[Path, GuestRecord]], sample: Callable[[], Usage]
) -> tuple[Usage, dict[str, Threads]]:
    """``sample()``'s host and guest CPU, and the QEMU threads of every running guest over
    the same window: read here for a QEMU of this host, by the kvmlab inside its guest
    hypervisor for a nested guest (once per hypervisor)."""
    from kvmlab.runtime.nested import inner_address
    from kvmlab.runtime.thread_cpu import Threads, read_threads, thread_use

    here = [rec for _, rec in rows if rec.via is None and rec.pid]
    before = {rec.pid: read_threads(rec.pid) for rec in here}
    t0 = time.monotonic()
    usage = sample()
    seconds = time.monotonic() - t0
    seen = {
        rec.name: Threads(
            "this host",
            [t.to_json() for t in thread_use(before[rec.pid], read_threads(rec.pid), seconds)],
        )
        for rec in here
    }
    inside: dict[tuple[str, str], dict[str, list[dict[str, object]]] | str] = {}
    for _, rec in rows:
        if rec.via is None:
            continue
        key, where = (rec.lab, rec.via), f"inside {rec.lab}/{rec.via}"
        if key not in inside:
            inside[key] = _threads_in(rec)
        found = inside[key]
        if isinstance(found, str):  # why that kvmlab could not say
            seen[rec.name] = Threads(where, [], found)
        elif inner_address(rec) in found:
            seen[rec.name] = Threads(where, found[inner_address(rec)])
        else:
            seen[rec.name] = Threads(where, [], "the kvmlab there does not list it")
    return usage, seen


def _threads_in(rec: GuestRecord) -> dict[str, list[dict[str, object]]] | str:
    """What the kvmlab inside a nested guest's hypervisor measures, or why it could not."""
    from kvmlab.errors import KvmlabError
    from kvmlab.runtime.nested import hypervisor_of
    from kvmlab.runtime.thread_cpu import threads_inside

    hyper = hypervisor_of(rec)
    if hyper is None:
        return "its guest hypervisor's record is gone"
    try:
        return threads_inside(hyper)
    except KvmlabError as exc:
        return str(exc)
    finally:
        hyper.disconnect()


def _print_threads(console: Console, rows: list[dict[str, object]]) -> None:
    """One table per guest: its QEMU's threads, where the time goes."""
    from kvmlab.report.grid import Col, print_grid

    columns = [
        Col("thread"),
        Col("tid", "right"),
        Col("role"),
        Col("guest %", "right"),
        Col("kernel %", "right"),
        Col("QEMU user %", "right"),
        Col("total %", "right"),
    ]
    for row in rows:
        if row.get("threads_problem"):
            print(
                f"{row['address']}: threads not measured: {row['threads_problem']}", file=sys.stderr
            )
            continue
        listed = row.get("threads")
        if not isinstance(listed, list) or not listed:
            continue
        cells = [
            [
                str(t["name"]),
                str(t["tid"]),
                str(t["role"]),
                f"{t['guest_pct']:.1f}",
                f"{t['kernel_pct']:.1f}",
                f"{t['qemu_user_pct']:.1f}",
                f"{t['total_pct']:.1f}",
            ]
            for t in listed
        ]
        own = row.get("guest_cpu_pct")
        guest = "-" if own is None else f"{own:.0f}%"
        title = (
            f"{row['address']}: QEMU threads, measured {row['threads_where']} "
            f"(% of one CPU; the guest's own CPU: {guest})"
        )
        console.print()
        print_grid(console, columns, cells, title=title)
