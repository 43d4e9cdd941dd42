"""A host-side profile as text: the idle-guest exit-storm write-up's ``perf kvm --host
top``, split by thread and by where the time went (guest mode, host kernel, QEMU's user
space), then the findings."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from kvmlab.exits.host_rules import HostDiagnosis
from kvmlab.exits.hostprof import CLASSES, UNATTRIBUTED, HostProfile
from kvmlab.report.grid import Col, print_grid

TOP = 15
"""Symbols listed (the JSON form has the 40 busiest)."""
CLASS_WORDS = {
    "guest": "guest mode (the vCPUs running the guest)",
    "kernel": "host kernel (exits, KVM, system calls, I/O)",
    "qemu_user": "QEMU's user space (emulation, its loops)",
    UNATTRIBUTED: "not attributed by perf",
}
LEVEL_WORDS = {"k": "[k]", ".": "[.]", "g": "[g]", "u": "[u]", "H": "[H]", "": ""}


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}" if whole else "-"


def header(profile: HostProfile) -> list[str]:
    """What was sampled, where, how and for how long."""
    cpu = profile.cpu_percent(profile.sampled_seconds)
    where = "on this host" if profile.where == "this host" else profile.where
    lines = [
        f"{profile.address}: its QEMU's host CPU sampled for {profile.seconds:g} s {where} "
        f"(guest under {profile.accel.upper()}): {profile.samples} samples at {profile.rate} "
        f"Hz, {cpu:.1f}% of a host CPU",
        f"perf: {profile.command}" + (f" ({profile.perf_version})" if profile.perf_version else ""),
    ]
    if profile.guest_cpu is not None:
        lines.append(f"the guest's own CPU over the window: {profile.guest_cpu:.1f}%")
    if profile.partial:
        lines.append(f"PARTIAL: {profile.partial}")
    lines.extend(f"note: {note}" for note in profile.notes)
    return lines


def show(profile: HostProfile, diagnosis: HostDiagnosis | None, console: Console) -> None:
    """Classes, threads, symbols, findings."""

    def say(text: str = "") -> None:
        console.print(text, soft_wrap=True, highlight=False, markup=False)

    for line in header(profile):
        say(line)
    total = profile.sampled_seconds
    if total:
        rows = [
            [
                CLASS_WORDS[cls],
                f"{profile.class_seconds(cls):.2f}",
                _pct(profile.class_seconds(cls), total),
                f"{profile.cpu_percent(profile.class_seconds(cls)):.1f}",
            ]
            for cls in (*CLASSES, UNATTRIBUTED)
            if cls != UNATTRIBUTED or profile.unattributed
        ]
        _grid(
            console,
            [Col("where"), Col("CPU s", "right"), Col("% samples", "right"), Col("% CPU", "right")],
            rows,
            "where QEMU's host CPU went (100% CPU = one host CPU)",
        )
    if profile.threads:
        rows = []
        for t in profile.threads:
            proc = t.proc or {}
            shown = "/".join(
                "-" if proc.get(k) is None else f"{proc[k]:.0f}"
                for k in ("guest_pct", "kernel_pct", "qemu_user_pct")
            )
            rows.append(
                [
                    t.name if t.tid is None else f"{t.name} ({t.tid})",
                    t.role,
                    str(t.samples),
                    f"{profile.cpu_percent(t.seconds):.1f}",
                    *(_pct(t.classes[c], t.seconds) for c in CLASSES),
                    shown,
                ]
            )
        _grid(
            console,
            [
                Col("QEMU thread"),
                Col("role"),
                Col("samples", "right"),
                Col("% CPU", "right"),
                Col("% guest", "right"),
                Col("% kernel", "right"),
                Col("% QEMU user", "right"),
                Col("/proc % g/k/u", "right"),
            ],
            rows,
            "by thread (shares of each thread's samples; /proc: guest, kernel, QEMU user "
            "time over the window around it)",
        )
    if profile.rows:
        rows = [
            [
                _pct(r.seconds, total),
                str(r.samples),
                r.thread,
                r.cls,
                r.dso,
                f"{LEVEL_WORDS.get(r.level, r.level)} {r.symbol}".strip(),
            ]
            for r in profile.rows[:TOP]
        ]
        _grid(
            console,
            [
                Col("%", "right"),
                Col("samples", "right"),
                Col("thread"),
                Col("class"),
                Col("shared object"),
                Col("symbol"),
            ],
            rows,
            "busiest symbols (where the samples stopped)",
        )
    if diagnosis is None:
        return
    if not diagnosis.findings:
        say("\nno rule fired: nothing in this profile matches a known cause")
    for n, finding in enumerate(diagnosis.findings, 1):
        rule = finding.rule
        say(f"\n{n}. [{rule.severity}] {rule.title} ({rule.id})")
        say(f"   cause: {' '.join(rule.cause.split())}")
        for line in finding.evidence:
            say(f"   evidence: {line}")
        for line in finding.look:
            say(f"   look at: {line}")
        for line in finding.host:
            say(f"   where its QEMU runs ({profile.where}): {line}")
        for src in rule.source:
            say(f"   source: {src}")
    for item in diagnosis.unchecked:
        say(item)


def _grid(console: Console, cols: Sequence[Col], rows: list[list[str]], title: str) -> None:
    console.print()
    print_grid(console, cols, rows, title=title)
