"""``kvmlab tune apply|verify|rollback``: the packet path's host tuning (cpu-partitioning),
reversible."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kvmlab.cli.groups import command_group
from kvmlab.cli.options import OutputOpt, output_choice
from kvmlab.errors import UsageError, printable

tune_app = command_group("Host tuning for the packet path: apply, verify, roll back.")

Lab = Annotated[
    str | None,
    typer.Argument(
        metavar="[LAB]",
        help="Take the CPUs from this lab (a file or a shipped lab's name): its [tuning] "
        "isolated, else its switch's cores.",
        show_default=False,
    ),
]
OldLab = Annotated[Path | None, typer.Option("--lab", hidden=True)]
Isolate = Annotated[
    str | None,
    typer.Option(
        "--isolate",
        help="CPUs to keep the host's work off, e.g. 1 or 2-5 (default: the lab's "
        "[tuning] isolated, else its switch's forwarding cores).",
    ),
]
Output = OutputOpt
Unmovable = Annotated[
    str | None,
    typer.Option(
        "--unmovable-irqs",
        help="An IRQ the kernel will not move that lands on an isolated CPU: "
        "refuse (tuning fails, naming it) or accept (named, not failed); default: the lab's "
        "[tuning] unmovable_irqs, else refuse.",
    ),
]


def lab_of(lab: str | None, old: Path | None) -> Path | None:
    """The lab file the argument names (``--lab FILE`` is an older kvmlab's spelling)."""
    if old is not None:
        raise UsageError(f"give the lab as the argument: kvmlab tune apply {old}")
    if lab is None:
        return None
    from kvmlab.cli.options import lab_file

    return lab_file(lab)


def isolated_cpus(lab: Path | None, isolate: str | None) -> tuple[int, ...]:
    """``--isolate``, else the lab's ``[tuning] isolated``, else its switch's cores; CPUs
    this host lacks are refused, naming where they came from and the host's CPUs."""
    from kvmlab.runtime.hostcpus import check_host_cpus, host_online_cpus
    from kvmlab.spec.hostcpus import missing_cpus
    from kvmlab.spec.units import parse_cpuset

    if isolate is not None:
        try:
            cpus = parse_cpuset(isolate)
        except ValueError as exc:
            raise UsageError(f"--isolate: {exc}") from None
        found = missing_cpus([("--isolate", cpus)], host_online_cpus())
        if found:
            raise UsageError(f"--isolate {printable(isolate)}: {found[0][1]}")
        return cpus
    if lab is None:
        raise UsageError("give --isolate CPUS or a LAB (its switch's cores are isolated)")
    from kvmlab.spec import load_lab

    spec = load_lab(lab).lab
    if spec.tuning is not None and spec.tuning.isolated:
        check_host_cpus(str(lab), [("tuning.isolated", spec.tuning.isolated)])
        return spec.tuning.isolated
    if spec.switch is not None:
        check_host_cpus(str(lab), [("switch.cores", spec.switch.cores)])
        return spec.switch.cores
    raise UsageError(f"{lab} has neither [tuning] isolated nor a [switch]; give --isolate")


def _print(what: str, outcome: object, output: str, extra: list[dict[str, str]]) -> None:
    from dataclasses import asdict

    data = {"action": what, **asdict(outcome), "boot": extra}  # type: ignore[call-overload]
    if output == "json":
        from kvmlab.cli.jsonout import emit

        emit("tuning", data)
        return
    label = "undone" if data["undone"] else what  # a failed apply wrote each one back
    for name, before, after in data["done"]:  # names and values read from /proc and /sys
        print(printable(f"  {label:8} {name}: {before} -> {after}"))
    for name, why in data["failed"]:
        print(printable(f"  FAILED   {name}: {why}"))
    for name, why in data["unmovable"]:
        print(printable(f"  unmovable {name}: {why}"))
    for name, why in data["kept"]:
        print(printable(f"  left     {name}: {why}"))
    if data["undone"]:
        print("  nothing changed: every value this apply had written was written back")
    for b in extra:
        print(printable(f"  boot     {b['missing']}"))
        print(printable(f"           fix: {b['fix']}"))


def _boot(cpus: tuple[int, ...]) -> list[dict[str, str]]:
    from kvmlab.net.tune import boot_findings

    cmdline = Path("/proc/cmdline").read_text()
    return [{"missing": m, "fix": f} for m, f in boot_findings(cpus, cmdline)]


def accept_unmovable(lab: Path | None, option: str | None) -> bool:
    """``--unmovable-irqs``, else the lab's ``[tuning] unmovable_irqs``, else refuse."""
    if option is not None:
        if option not in ("refuse", "accept"):
            from kvmlab.spec.units import quoted

            raise UsageError(f"--unmovable-irqs: refuse or accept, not {quoted(option)}")
        return option == "accept"
    if lab is None:
        return False
    from kvmlab.spec import load_lab

    spec = load_lab(lab).lab
    return spec.tuning is not None and spec.tuning.unmovable_irqs == "accept"


@tune_app.command("apply")
def apply_cmd(
    lab: Lab = None,
    isolate: Isolate = None,
    output: Output = "text",
    unmovable: Unmovable = None,
    old_lab: OldLab = None,
) -> None:
    """Apply the run-time half of cpu-partitioning; print the boot-time half as fixes.
    All or nothing: a setting that does not take fails the apply (exit 3), naming it, and
    every value changed is written back.

    Examples: kvmlab tune apply vhost-user-testpmd; kvmlab tune apply --isolate 1."""
    from kvmlab.net.tune import State, apply, cpu_partitioning

    lab_path = lab_of(lab, old_lab)
    output = output_choice(output, "text", "json")
    cpus = isolated_cpus(lab_path, isolate)
    accept = accept_unmovable(lab_path, unmovable)
    state = State()
    outcome = apply(cpu_partitioning(cpus), state, accept_unmovable=accept)
    _print("applied", outcome, output, _boot(cpus))
    if outcome.failed:
        raise typer.Exit(3)
    if output == "text":
        print(
            printable(
                f"tuned for isolated CPUs {','.join(map(str, cpus))}; originals saved in "
                f"{state.path}; 'kvmlab tune rollback' restores them"
            )
        )


@tune_app.command("verify")
def verify_cmd(
    lab: Lab = None,
    isolate: Isolate = None,
    output: Output = "text",
    unmovable: Unmovable = None,
    old_lab: OldLab = None,
) -> None:
    """Check every setting against what tuning wants (exit 1 when any differs, naming
    it). An IRQ the kernel will not move passes only when 'kvmlab tune apply' found so and
    its interrupts land on host CPUs (or unmovable IRQs are accepted)."""
    from kvmlab.net.tune import State, cpu_partitioning, verify

    lab_path = lab_of(lab, old_lab)
    output = output_choice(output, "text", "json")
    cpus = isolated_cpus(lab_path, isolate)
    accept = accept_unmovable(lab_path, unmovable)
    saved = State().read()
    known = saved.unmovable if saved is not None else []
    outcome = verify(cpu_partitioning(cpus), unmovable=known, accept_unmovable=accept)
    _print("ok", outcome, output, _boot(cpus))
    if outcome.failed:
        raise typer.Exit(1)


@tune_app.command("rollback")
def rollback_cmd(output: Output = "text") -> None:
    """Write back every value tuning changed, exactly as it was."""
    from kvmlab.net.tune import Outcome, State, rollback

    output = output_choice(output, "text", "json")
    state = State()
    if state.read() is None:
        print("nothing to roll back: no tuning applied", file=sys.stderr)
        if output == "json":  # an empty document is still a document
            _print("restored", Outcome([], []), output, [])
        return
    outcome = rollback(state)
    _print("restored", outcome, output, [])
    if output == "text" and not outcome.done and not outcome.failed and not outcome.kept:
        print(
            "nothing to roll back: the tuning changed no value (the IRQs it lists are ones "
            "the kernel manages, never changed); its state is removed"
        )
    if outcome.failed:
        raise typer.Exit(3)


def restore_abandoned(tuning: bool = False) -> None:
    """Roll back tuning a kvmlab run applied and could not undo (it was killed): every
    kvmlab command does this first, saying so. A state file that is not kvmlab's record is
    one line on stderr, and the command goes on (``tuning``: the command is ``kvmlab
    tune``, which refuses it itself).

    Most commands find no state file: that costs one ``lstat``. The models that read a
    state are imported only when there is a file, and the rollback (with the lab models it
    takes the host's CPUs from) only when a run that died left one."""
    from kvmlab.net.tunepath import state_path, surely_absent

    path = state_path()
    if surely_absent(path):
        return
    from kvmlab.errors import KvmlabError
    from kvmlab.net.abandoned_tuning import roll_back_abandoned

    try:
        abandoned = roll_back_abandoned(path)
    except KvmlabError as exc:
        if not tuning:  # kvmlab tune refuses it itself, once
            print(printable(f"kvmlab: {exc}"), file=sys.stderr)
        return
    if abandoned is None:
        return
    pid, outcome = abandoned.pid, abandoned.outcome
    failed = f", {len(outcome.failed)} failed" if outcome.failed else ""
    kept = f", {len(outcome.kept)} left as changed since" if outcome.kept else ""
    print(
        f"kvmlab: rolled back the tuning of a kvmlab run that died (pid {pid}): "
        f"{len(outcome.done)} setting(s) restored{failed}{kept}",
        file=sys.stderr,
    )
    for name, why in outcome.kept:
        print(printable(f"kvmlab:   left {name}: {why}"), file=sys.stderr)
