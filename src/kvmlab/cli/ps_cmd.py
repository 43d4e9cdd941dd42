"""``kvmlab ps``: running guests with host CPU next to guest CPU."""

from __future__ import annotations

import json
import time

from kvmlab.runtime.rundir import running_labs
from kvmlab.spec.units import format_size


def run_ps(output: str) -> None:
    """List running labs and guests with host CPU next to guest CPU."""
    from kvmlab.runtime.usage import sample_usage

    rows = []
    for lab_dir in running_labs():
        for run_dir, rec in lab_dir.records():
            rows.append((run_dir, rec))
    usage = sample_usage(rows)
    now = time.time()
    out: list[dict[str, object]] = []
    for run_dir, rec in rows:
        host_cpu, guest_cpu = usage.get(rec.pid, (None, None))
        out.append({
            "lab": rec.lab, "guest": "/".join(rec.address), "address": rec.name,
            "level": f"L{len(rec.address)}", "pid": rec.pid,
            "state": "running" if rec.running(run_dir) else "dead",
            "accel": rec.accel, "vcpus": rec.vcpus, "memory_bytes": rec.memory,
            "uptime_s": round(now - rec.started, 1),
            "host_cpu_pct": None if rec.via else host_cpu, "guest_cpu_pct": guest_cpu,
            "via": rec.via, "boot_s": rec.boot,
        })  # fmt: skip
    if output == "json":
        print(json.dumps(out, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="running guests (CPU in % of one host CPU, sampled over 0.5 s)")
    for column in ("address", "level", "pid", "state", "accel", "vCPUs", "memory", "uptime",
                   "host CPU%", "guest CPU%"):  # fmt: skip
        table.add_column(column)
    for row in out:
        table.add_row(
            str(row["address"]), str(row["level"]), str(row["pid"]), str(row["state"]),
            str(row["accel"]), str(row["vcpus"]), format_size(int(str(row["memory_bytes"]))),
            f"{row['uptime_s']:.0f} s",
            "-" if row["host_cpu_pct"] is None else f"{row['host_cpu_pct']:.0f}",
            "-" if row["guest_cpu_pct"] is None else f"{row['guest_cpu_pct']:.0f}",
        )  # fmt: skip
    Console().print(table if out else "no running guests")
