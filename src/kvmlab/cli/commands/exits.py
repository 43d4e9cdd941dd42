"""``kvmlab exits`` and ``kvmlab diagnose``: VM-exit profiles and what they mean."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.app import PANEL_EXITS, app
from kvmlab.cli.options import lab_file, output_choice
from kvmlab.errors import UsageError

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


@app.command(rich_help_panel=PANEL_EXITS)
def exits(
    address: Annotated[
        str | None,
        typer.Argument(
            metavar="LAB/GUEST",
            help="A running guest at any level (nested/l1/l2); with --compare: a LAB.",
        ),
    ] = None,
    seconds: WindowOpt = None,
    provider: ProviderOpt = "auto",
    live: Annotated[bool, typer.Option("--live", help="Refresh each window until Ctrl-C.")] = False,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
    host_side_only: Annotated[bool, typer.Option("--host-side-only", hidden=True)] = False,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="Boot the LAB as written and each variant, profile --guest in each, "
            "compare (the check of a fix).",
        ),
    ] = False,
    guest: Annotated[
        str | None,
        typer.Option("--guest", help="With --compare: the guest's path in the lab (l1/idle)."),
    ] = None,
    settle: Annotated[
        float | None,
        typer.Option("--settle", help="With --compare: seconds idle before profiling (10)."),
    ] = None,
    variant: Annotated[
        list[str] | None,
        typer.Option(
            "--variant",
            help="With --compare: compare these (repeatable; default: the lab as written "
            "and every variant).",
        ),
    ] = None,
    import_: Annotated[
        Path | None,
        typer.Option(
            "--import",
            help="perf kvm stat report text or perf.data; --seconds: "
            "its window (perf kvm stat live: 1).",
        ),
    ] = None,
    host_profile: Annotated[
        bool,
        typer.Option(
            "--host-profile",
            help="Sample where the guest's QEMU spends its host CPU instead (perf, where "
            "that QEMU runs): guest mode, host kernel and QEMU user space by thread and "
            "symbol, with findings.",
        ),
    ] = False,
) -> None:
    """VM-exit profile of a running guest: exits by reason with handling times, per vCPU,
    port I/O, MSR and MMIO exits named, and host CPU against guest CPU for the window.

    Taken where the guest's KVM runs (inside its guest hypervisor for a nested guest), with
    the best provider there: kernel tracepoints, else KVM's counters (query-stats). With
    --host-profile, a sampled profile of its QEMU process instead (perf record -e
    cpu-clock where that QEMU runs; any accelerator).

    Examples: kvmlab exits timer-storm/l1/idle; kvmlab exits timer-storm/l1/idle
    --host-profile; kvmlab exits rtc-storm --compare --guest l1/idle;
    kvmlab exits --import perf-kvm-stat.txt --seconds 10.
    """
    from kvmlab.cli.exits_cmds import DEFAULT_SECONDS, check_provider, refuse_with

    output = output_choice(output, "text", "json")
    provider = check_provider(provider)
    # what neither --host-profile nor --import takes (each also refuses the other's flag)
    others = {
        "--compare": compare,
        "--live": live,
        "--provider": provider != "auto",
        "--guest": guest is not None,
        "--settle": settle is not None,
        "--variant": bool(variant),
        "--host-side-only": host_side_only,
    }
    if host_profile:
        from kvmlab.cli.exits_cmds import run_host_profile

        refuse_with("--host-profile", {**others, "--import": import_ is not None})
        if address is None:
            raise UsageError("--host-profile needs the guest's address (LAB/GUEST)")
        run_host_profile(address, DEFAULT_SECONDS if seconds is None else seconds, output)
        return
    if import_ is not None:
        from kvmlab.cli.exits_cmds import run_import

        refuse_with("--import", others)
        run_import(import_, address, seconds, output)
        return
    if compare:
        from kvmlab.cli.diagnose_cmds import run_compare

        refuse_with("--compare", {"--live": live, "--host-side-only": host_side_only})
        if address is None or guest is None:
            raise UsageError(
                "--compare boots a lab: kvmlab exits LAB --compare --guest PATH (the guest "
                "to profile in each variant, e.g. kvmlab exits rtc-storm --compare --guest "
                "l1/idle)"
            )
        run_compare(
            lab_file(address),
            guest,
            DEFAULT_SECONDS if seconds is None else seconds,
            10.0 if settle is None else settle,
            output,
            provider,
            variant or [],
        )
        return
    if guest is not None or settle is not None or variant:
        raise UsageError("--guest, --settle and --variant go with LAB --compare")
    if address is None:
        raise UsageError(
            "give a running guest's address (LAB/GUEST), --import FILE, or LAB --compare"
        )
    from kvmlab.cli.exits_cmds import run_exits

    run_exits(
        address,
        DEFAULT_SECONDS if seconds is None else seconds,
        provider,
        live,
        output,
        not host_side_only,
    )


@app.command(rich_help_panel=PANEL_EXITS)
def diagnose(
    address: Annotated[
        str | None,
        typer.Argument(metavar="LAB/GUEST", help="A running guest at any level."),
    ] = None,
    seconds: WindowOpt = None,
    provider: ProviderOpt = "auto",
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Write the lab with the fix of the first finding that has a lab-file fix.",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="With --apply: the new lab file (must not exist).")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json.")] = "text",
    import_: Annotated[
        Path | None,
        typer.Option(
            "--import",
            help="Diagnose a perf kvm stat report or perf.data instead; --seconds: its window.",
        ),
    ] = None,
) -> None:
    """Turn a guest's exit profile into findings: the cause, the numbers that matched, the fix
    as a lab-file change (with its QEMU and libvirt forms) or host steps, and what to verify.

    Examples: kvmlab diagnose timer-storm/l1/idle; kvmlab diagnose timer-storm/l1/idle
    --apply --out fixed.toml; kvmlab diagnose --import perf-kvm-stat.txt --seconds 10.
    """
    from kvmlab.cli.diagnose_cmds import run_diagnose
    from kvmlab.cli.exits_cmds import check_provider, refuse_with

    output = output_choice(output, "text", "json")
    provider = check_provider(provider)
    if address is not None and import_ is not None:
        raise UsageError(
            "give the guest's address (LAB/GUEST) or --import FILE, not both: an import is "
            "diagnosed on its own"
        )
    if address is None and import_ is None:
        raise UsageError("give the guest's address (LAB/GUEST) or --import FILE")
    if import_ is not None:
        refuse_with(
            "--import",
            {
                "--apply (it needs a running guest of a lab)": apply,
                "--out": out is not None,
                "--provider": provider != "auto",
            },
        )
    if out is not None and not apply:
        raise UsageError("--out names the lab file --apply writes; give --apply too")
    run_diagnose(address or "", import_, seconds, provider, output, apply, out)
