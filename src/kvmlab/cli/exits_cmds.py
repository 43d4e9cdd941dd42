"""``kvmlab exits``: the VM-exit profile of a running guest."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import typer

from kvmlab.cli.lab_cmds import find_guest, interruptible
from kvmlab.errors import UsageError, printable

PROVIDERS = ("auto", "tracepoints", "counters", "perf")
DEFAULT_SECONDS = 10.0
LIVE_SECONDS = (0.1, 3600.0)
"""A window on a running guest: long enough to see exits, short enough to wait for."""
IMPORT_SECONDS = (0.001, 1e6)
"""The window an imported perf report covered (perf kvm stat live: 1 s by default)."""


def check_provider(value: str) -> str:
    """The ``--provider`` value, checked (a bad one is a usage error naming the option)."""
    if value not in PROVIDERS:
        listed = f"{', '.join(PROVIDERS[:-1])} or {PROVIDERS[-1]}"
        raise typer.BadParameter(f"choose {listed} (got {value!r})", param_hint="--provider")
    return value


def check_seconds(seconds: float, limits: tuple[float, float], flag: str = "--seconds") -> float:
    """``seconds`` when finite and within ``limits``, else a :class:`UsageError`."""
    low, high = limits
    if not (math.isfinite(seconds) and low <= seconds <= high):
        raise UsageError(f"{flag} must be between {low:g} and {high:g}, not {seconds:g}")
    return seconds


def refuse_with(option: str, given: Mapping[str, bool]) -> None:
    """Refuse the options in ``given`` that were given alongside ``option``."""
    extra = [name for name, present in given.items() if present]
    if extra:
        raise UsageError(f"{option} takes no {' or '.join(extra)}")


def run_exits(
    address: str,
    seconds: float,
    provider: str,
    live: bool,
    output: str,
    guest_side: bool = True,
) -> None:
    """Profile ``address`` for ``seconds`` (repeatedly with ``live``) and print it."""
    from rich.console import Console

    from kvmlab.exits.collect import profile_guest
    from kvmlab.exits.text import show

    check_seconds(seconds, LIVE_SECONDS)
    if live and output == "json":
        raise UsageError("--live prints tables; use -o json without --live")
    run_dir, record = find_guest(address)
    console = Console()
    with interruptible(f"profiling the VM exits of {address}"):
        while True:
            profile = profile_guest(
                run_dir,
                record,
                seconds,
                provider,  # type: ignore[arg-type]
                guest_side=guest_side,
            )
            if output == "json":
                print(json.dumps(profile.to_json(), indent=2))
                return
            if live and console.is_terminal:
                console.clear()
            show(profile, console)
            if not live:
                return


def run_host_profile(address: str, seconds: float, output: str) -> None:
    """Sample where ``address``'s QEMU spends its host CPU; print it with its findings."""
    from rich.console import Console

    from kvmlab.exits.host_rules import evaluate
    from kvmlab.exits.hostprof_text import show
    from kvmlab.exits.sampling import host_profile_guest

    check_seconds(seconds, LIVE_SECONDS)
    run_dir, record = find_guest(address)
    with interruptible(f"sampling the host CPU of {address}'s QEMU"):
        profile = host_profile_guest(run_dir, record, seconds)
    diagnosis = evaluate(profile, address=address)
    if output == "json":
        doc = profile.to_json()
        doc["findings"] = [f.to_json() for f in diagnosis.findings]
        doc["unchecked"] = list(diagnosis.unchecked)
        print(json.dumps(doc, indent=2))
        return
    show(profile, diagnosis, Console())


def import_seconds(seconds: float | None) -> float:
    """The window of an imported report: given, since perf's output does not say it."""
    if seconds is None:
        raise UsageError(
            "--import needs --seconds, the window perf measured (its output does "
            "not say): 1 for a 'perf kvm stat live' screen, the recording's "
            "length for a report"
        )
    return check_seconds(seconds, IMPORT_SECONDS)


def run_import(path: Path, address: str | None, seconds: float | None, output: str) -> None:
    """Show an imported ``perf kvm stat`` report like a profile kvmlab took."""
    from rich.console import Console

    from kvmlab.exits.perfkvm import import_file

    if not str(path) or str(path) == ".":  # typer turns "" into "."
        raise UsageError("--import: give the file of a 'perf kvm stat report' or a perf.data")
    from kvmlab.exits.text import show

    window = import_seconds(seconds)
    profile = import_file(path, printable(address or str(path)), window)
    if output == "json":
        print(json.dumps(profile.to_json(), indent=2))
        return
    show(profile, Console())
