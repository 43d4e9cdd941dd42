"""``kvmlab exits`` and ``kvmlab diagnose``: VM-exit profiles and what they mean."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_EXITS, app
from kvmlab.cli.options import OutputOpt

WindowOpt = Annotated[
    float | None,
    typer.Option(
        "--seconds",
        "-s",
        help="Length of the window (default 10; with --import: "
        "the window perf measured, required).",
    ),
]
ProviderOpt = Annotated[
    str, typer.Option("--provider", help="auto, tracepoints, counters or perf.")
]


ExitsTargetArg = Annotated[
    str | None,
    typer.Argument(
        metavar="LAB/GUEST",
        help="A running guest at any level (nested/l1/l2), or a VM kvmlab did not start: "
        "pid:N or domain:NAME (kvmlab ps --all lists them); with --compare: a LAB.",
    ),
]
WithinOpt = Annotated[
    str | None,
    typer.Option(
        "--within",
        metavar="LAB/GUEST",
        help="With pid:N: the guest hypervisor that QEMU runs in (profiled there).",
    ),
]
ConnectOpt = Annotated[
    str | None,
    typer.Option(
        "--connect", "-c", help="With domain:NAME: its libvirt daemon (default qemu:///system)."
    ),
]
LiveOpt = Annotated[bool, typer.Option("--live", help="Refresh each window until Ctrl-C.")]
HostSideOnlyOpt = Annotated[bool, typer.Option("--host-side-only", hidden=True)]
CompareOpt = Annotated[
    bool,
    typer.Option(
        "--compare",
        help="Boot the LAB as written and each variant, profile --guest in each, "
        "compare (the check of a fix).",
    ),
]
CompareGuestOpt = Annotated[
    str | None,
    typer.Option("--guest", help="With --compare: the guest's path in the lab (l1/idle)."),
]
SettleOpt = Annotated[
    float | None,
    typer.Option("--settle", help="With --compare: seconds idle before profiling (10)."),
]
CompareVariantsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--variant",
        help="With --compare: compare these (repeatable; default: the lab as written "
        "and every variant).",
    ),
]
ExitsImportOpt = Annotated[
    Path | None,
    typer.Option(
        "--import",
        help="perf kvm stat report text or perf.data; --seconds: "
        "its window (perf kvm stat live: 1).",
    ),
]
HostProfileOpt = Annotated[
    bool,
    typer.Option(
        "--host-profile",
        help="Sample where the guest's QEMU spends its host CPU instead (perf, where "
        "that QEMU runs): guest mode, host kernel and QEMU user space by thread and "
        "symbol, with findings.",
    ),
]
GuestArg = Annotated[
    str | None,
    typer.Argument(
        metavar="LAB/GUEST",
        help="A running guest at any level, or a VM kvmlab did not start: pid:N or domain:NAME.",
    ),
]
ApplyOpt = Annotated[
    bool,
    typer.Option(
        "--apply",
        help="Write the lab with the fix of the first finding that has a lab-file fix "
        "(domain:NAME: define the domain with it).",
    ),
]
ApplyOutOpt = Annotated[
    Path | None, typer.Option("--out", help="With --apply: the new lab file (must not exist).")
]
DiagnoseImportOpt = Annotated[
    Path | None,
    typer.Option(
        "--import",
        help="Diagnose a perf kvm stat report or perf.data instead; --seconds: its window "
        "(with pid:N or domain:NAME: that VM's configuration is read).",
    ),
]


@app.command(rich_help_panel=PANEL_EXITS)
def exits(
    address: ExitsTargetArg = None,
    seconds: WindowOpt = None,
    provider: ProviderOpt = "auto",
    live: LiveOpt = False,
    output: OutputOpt = "text",
    host_side_only: HostSideOnlyOpt = False,
    compare: CompareOpt = False,
    guest: CompareGuestOpt = None,
    settle: SettleOpt = None,
    variant: CompareVariantsOpt = None,
    import_: ExitsImportOpt = None,
    host_profile: HostProfileOpt = False,
    connect: ConnectOpt = None,
    within: WithinOpt = None,
) -> None:
    """VM-exit profile of a running guest: exits by reason with handling times, per vCPU,
    port I/O, MSR and MMIO exits named, and host CPU against guest CPU for the window.

    Taken where the guest's KVM runs (inside its guest hypervisor for a nested guest), with
    the best provider there: kernel tracepoints, else KVM's counters (query-stats). With
    --host-profile, a sampled profile of its QEMU process instead (perf record -e
    cpu-clock where that QEMU runs; any accelerator).

    A VM kvmlab did not start (pid:N, domain:NAME) is profiled from outside, read-only:
    nothing is signalled, paused or changed.

    Examples: kvmlab exits timer-storm/l1/idle; kvmlab exits timer-storm/l1/idle
    --host-profile; kvmlab exits rtc-storm --compare --guest l1/idle;
    kvmlab exits pid:4242; kvmlab exits domain:win10 -c qemu:///system;
    kvmlab exits pid:812 --within nested/l1;
    kvmlab exits --import perf-kvm-stat.txt --seconds 10.
    """
    given = dict(locals())  # the options as typed, by name
    from kvmlab.cli.exits_cmds import ExitsCommand

    ExitsCommand(**given).run()


@app.command(rich_help_panel=PANEL_EXITS)
def diagnose(
    address: GuestArg = None,
    seconds: WindowOpt = None,
    provider: ProviderOpt = "auto",
    apply: ApplyOpt = False,
    out: ApplyOutOpt = None,
    output: OutputOpt = "text",
    import_: DiagnoseImportOpt = None,
    connect: ConnectOpt = None,
    within: WithinOpt = None,
) -> None:
    """Turn a guest's exit profile into findings: the cause, the numbers that matched, the fix
    as a lab-file change (with its QEMU and libvirt forms) or host steps, and what to verify.

    A VM kvmlab did not start (pid:N, domain:NAME) is diagnosed against its own
    configuration, read as kvmlab import reads it: each fix is shown as the change to its
    domain XML or its QEMU command line. --apply on domain:NAME changes only the domain's
    persistent definition (after printing the diff); it takes effect when the VM restarts.

    Examples: kvmlab diagnose timer-storm/l1/idle; kvmlab diagnose timer-storm/l1/idle
    --apply --out fixed.toml; kvmlab diagnose domain:win10 -c qemu:///system;
    kvmlab diagnose domain:win10 --import perf-kvm-stat.txt --seconds 10;
    kvmlab diagnose pid:812 --within nested/l1.
    """
    from kvmlab.cli.diagnose_cmds import diagnose_cmd

    diagnose_cmd(address, seconds, provider, apply, out, output, import_, connect, within)
