"""A profile as tables, like ``perf kvm stat report`` and the two ``top``s (host and guest)
of the idle-guest exit-storm write-up."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from kvmlab.exits.model import Profile
from kvmlab.exits.qstats import COUNTER_KINDS
from kvmlab.report.grid import Col, print_grid

TOP = 12
"""Rows per drill-down table (the JSON form has them all)."""


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}" if whole else "-"


def header(profile: Profile) -> list[str]:
    """What was measured, how and for how long."""
    lines = [
        f"{profile.address}: {profile.total} VM exits in {profile.seconds:.1f} s "
        f"({profile.rate(profile.total):.0f}/s)"
        + (f", {profile.vendor.upper()}" if profile.vendor else ""),
        f"provider: {profile.provider} ({profile.provider_note})",
    ]
    if profile.partial:
        lines.append(f"PARTIAL: {profile.partial}")
    lines.extend(f"note: {note}" for note in profile.notes)
    return lines


def show(profile: Profile, console: Console) -> None:
    """Every table the profile has data for."""
    for line in header(profile):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    total = profile.total
    time_total = sum(r.time_ns or 0 for r in profile.reasons)
    if profile.reasons:
        rows = [
            [
                r.reason,
                r.kind,
                str(r.count),
                f"{profile.rate(r.count):.0f}",
                _pct(r.count, total),
                _pct(r.time_ns or 0, time_total) if r.time_ns else "-",
                _us(r.min_ns),
                _us(r.max_ns),
                _us(r.avg_ns),
            ]
            for r in profile.sorted_reasons()
        ]
        cols = [
            Col("exit reason"),
            Col("kind"),
            Col("count", "right"),
            Col("per s", "right"),
            Col("% exits", "right"),
            Col("% time", "right"),
            Col("min us", "right"),
            Col("max us", "right"),
            Col("avg us", "right"),
        ]
        _grid(console, cols, rows, "VM exits by reason (handling time: kvm_exit to kvm_entry)")
    if profile.counters:
        rows = [
            [name, COUNTER_KINDS.get(name, ""), str(value), f"{profile.rate(value):.0f}"]
            for name, value in sorted(profile.counters.items(), key=lambda kv: -kv[1])
            if value
        ]
        cols = [Col("KVM counter"), Col("kind"), Col("delta", "right"), Col("per s", "right")]
        _grid(console, cols, rows, "KVM statistics (query-stats), change over the window")
    if len(profile.vcpus) > 1 or (profile.vcpus and not profile.reasons):
        rows = [
            [str(v), str(n), f"{profile.rate(n):.0f}"] for v, n in sorted(profile.vcpus.items())
        ]
        _grid(
            console,
            [Col("vCPU", "right"), Col("exits", "right"), Col("per s", "right")],
            rows,
            "exits per vCPU",
        )
    _drilldowns(profile, console)
    _cpu(profile, console)


def _drilldowns(profile: Profile, console: Console) -> None:
    rw = {True: "write", False: "read"}
    if profile.pio:
        rows = [
            [
                f"0x{p.port:x}",
                p.name or "?",
                rw[p.write],
                str(p.count),
                f"{profile.rate(p.count):.0f}",
            ]
            for p in profile.pio[:TOP]
        ]
        _grid(
            console,
            [
                Col("port"),
                Col("device/register"),
                Col("dir"),
                Col("count", "right"),
                Col("per s", "right"),
            ],
            rows,
            "port I/O exits",
        )
    if profile.msr:
        rows = [
            [
                f"0x{m.index:x}",
                m.name or "?",
                rw[m.write],
                str(m.count),
                f"{profile.rate(m.count):.0f}",
            ]
            for m in profile.msr[:TOP]
        ]
        _grid(
            console,
            [Col("MSR"), Col("name"), Col("dir"), Col("count", "right"), Col("per s", "right")],
            rows,
            "MSR exits",
        )
    if profile.mmio:
        rows = [
            [
                f"0x{m.gpa:x}",
                m.name or "?",
                rw[m.write],
                str(m.count),
                f"{profile.rate(m.count):.0f}",
            ]
            for m in profile.mmio[:TOP]
        ]
        _grid(
            console,
            [
                Col("guest-physical"),
                Col("device"),
                Col("dir"),
                Col("count", "right"),
                Col("per s", "right"),
            ],
            rows,
            "MMIO exits",
        )


def _cpu(profile: Profile, console: Console) -> None:
    cpu = profile.cpu
    if cpu is None:
        return
    guest = cpu.guest_percent
    gap = cpu.gap_percent
    rows = [
        [
            "host: QEMU (user+system)",
            f"{cpu.host_percent:.1f}",
            f"user {cpu.host_user:.2f} s, system {cpu.host_system:.2f} s, "
            f"of which in guest mode {cpu.host_guest:.2f} s",
        ],
        [
            "guest: its own /proc/stat",
            "-" if guest is None else f"{guest:.1f}",
            "-" if cpu.guest_busy is None else f"busy {cpu.guest_busy:.2f} s",
        ],
        [
            "gap (host - guest)",
            "-" if gap is None else f"{gap:.1f}",
            "host CPU the guest does not see as its own work",
        ],
    ]
    _grid(
        console,
        [Col("CPU over the window"), Col("%", "right"), Col("detail")],
        rows,
        f"host CPU against guest CPU ({cpu.seconds:.1f} s; 100% = one CPU)",
    )
    busiest = sorted(cpu.threads.items(), key=lambda kv: -kv[1])[:6]
    if busiest and busiest[0][1] > 0:
        rows = []
        for name, secs in busiest:
            split = cpu.thread_split.get(name, {})
            parts = [split.get(k) for k in ("guest", "kernel", "qemu_user")]
            rows.append(
                [
                    name,
                    f"{secs:.2f}",
                    _pct(secs, cpu.seconds),
                    *("-" if p is None else f"{p:.2f}" for p in parts),
                ]
            )
        _grid(
            console,
            [
                Col("QEMU thread"),
                Col("CPU s", "right"),
                Col("%", "right"),
                Col("guest s", "right"),
                Col("kernel s", "right"),
                Col("QEMU user s", "right"),
            ],
            rows,
            "busiest QEMU threads (guest mode, host kernel, QEMU's own user space)",
        )


def _grid(console: Console, cols: Sequence[Col], rows: list[list[str]], title: str) -> None:
    console.print()
    print_grid(console, cols, rows, title=title)
