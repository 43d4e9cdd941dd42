"""``kvmlab ps``: running guests with host CPU next to guest CPU."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from kvmlab.spec.values import format_size

if TYPE_CHECKING:
    from rich.console import Console

    from kvmlab.report.grid import Col


def run_ps(output: str, threads: bool = False, every: bool = False) -> None:
    """List running labs and guests with host CPU next to guest CPU (``threads``: and each
    QEMU's threads split into guest, host kernel and QEMU user time; ``every``: and every
    other QEMU on this host)."""
    from kvmlab.runtime.running_guests import running_guests

    out = running_guests(threads)
    others = _others() if every else None
    if output == "json":
        from kvmlab.cli.jsonout import emit

        emit("ps", {"guests": out} | ({} if others is None else {"others": others}))
        return
    if not out and not others:
        print("no running guests" if others is None else "no QEMU runs on this host")
        return
    from rich.console import Console

    from kvmlab.report.grid import print_grid

    for row in out:
        if row["problem"]:
            print(f"{row['address']}: {row['problem']}", file=sys.stderr)
    title = "running guests (CPU in % of one host CPU, sampled over 0.5 s)"
    console = Console()
    if out:
        print_grid(console, _columns(), [_cells(row) for row in out], title=title)
    if threads:
        _print_threads(console, out)
    if others:
        _print_others(console, others)


def _others() -> list[dict[str, object]]:
    """Every QEMU here kvmlab did not start, as ``ps -o json`` gives them."""
    from kvmlab.runtime.host_vms import host_vms

    return [
        {
            "target": vm.target,
            "origin": vm.origin,
            "pid": vm.qemu.pid,
            "user": vm.qemu.user,
            "name": vm.qemu.name,
            "accel": vm.qemu.accel,
            "manager": vm.manager,
            "host_cpu_pct": vm.host_cpu_pct,
            "guest_cpu_pct": vm.guest_cpu_pct,
        }
        for vm in host_vms()
        if vm.origin != "kvmlab"
    ]


def _print_others(console: Console, rows: list[dict[str, object]]) -> None:
    from kvmlab.errors import printable
    from kvmlab.report.grid import Col, print_grid

    cols = [
        Col("target"),
        Col("origin"),
        Col("pid", "right"),
        Col("name"),
        Col("user"),
        Col("accel"),
        Col("host CPU%", "right"),
        Col("guest CPU%", "right"),
        Col("manager"),
    ]
    cells = [
        [
            printable(str(r["target"])),
            str(r["origin"]),
            str(r["pid"]),
            printable(str(r["name"] or "-")),
            printable(str(r["user"])),
            str(r["accel"]),
            "-" if r["host_cpu_pct"] is None else f"{r['host_cpu_pct']:.0f}",
            "unknown" if r["guest_cpu_pct"] is None else f"{r['guest_cpu_pct']:.0f}",
            printable(str(r["manager"] or "-")),
        ]
        for r in rows
    ]
    title = (
        "other VMs on this host (guest CPU from a libvirt domain's guest agent; unknown "
        "where none answers)"
    )
    print_grid(console, cols, cells, title=title)


def _columns() -> list[Col]:
    from kvmlab.report.grid import Col

    return [
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


def _cells(row: dict[str, object]) -> list[str]:
    known = "accel" in row
    return [
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
        cells = [_thread_cells(t) for t in listed]
        own = row.get("guest_cpu_pct")
        guest = "-" if own is None else f"{own:.0f}%"
        title = (
            f"{row['address']}: QEMU threads, measured {row['threads_where']} "
            f"(% of one CPU; the guest's own CPU: {guest})"
        )
        console.print()
        print_grid(console, columns, cells, title=title)


def _thread_cells(t: dict[str, object]) -> list[str]:
    return [
        str(t["name"]),
        str(t["tid"]),
        str(t["role"]),
        f"{t['guest_pct']:.1f}",
        f"{t['kernel_pct']:.1f}",
        f"{t['qemu_user_pct']:.1f}",
        f"{t['total_pct']:.1f}",
    ]
