"""``kvmlab ps``: running guests with host CPU next to guest CPU."""

from __future__ import annotations

import json
import sys
import time

from kvmlab.runtime.rundir import running_labs
from kvmlab.spec.units import format_size


def run_ps(output: str) -> None:
    """List running labs and guests with host CPU next to guest CPU."""
    from kvmlab.runtime.cpu_compare import sample_usage

    entries = [e for lab_dir in running_labs() for e in lab_dir.entries()]
    rows = [
        (e.run_dir, e.record) for e in entries if e.record is not None and e.state() == "running"
    ]
    usage = sample_usage(rows)
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
        out.append(row)
    if output == "json":
        print(json.dumps(out, indent=2))
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
    if not out:
        print("no running guests")
        return
    title = "running guests (CPU in % of one host CPU, sampled over 0.5 s)"
    print_grid(Console(), columns, cells, title=title)
