"""``kvmlab exits``: the VM-exit profile of a running guest."""

from __future__ import annotations

import json
import math
from pathlib import Path

from kvmlab.cli.run_cmds import find_guest, interruptible
from kvmlab.errors import UsageError


def run_exits(
    address: str, seconds: float, provider: str, live: bool, output: str,
    guest_side: bool = True,
) -> None:  # fmt: skip
    """Profile ``address`` for ``seconds`` (repeatedly with ``live``) and print it."""
    from rich.console import Console

    from kvmlab.exits.collect import profile_guest
    from kvmlab.exits.text import show

    if not (math.isfinite(seconds) and 0.1 <= seconds <= 3600):
        raise UsageError(f"--seconds must be between 0.1 and 3600, not {seconds:g}")
    if live and output == "json":
        raise UsageError("--live prints tables; use -o json without --live")
    run_dir, record = find_guest(address)
    console = Console()
    with interruptible(f"profiling the VM exits of {address}"):
        while True:
            profile = profile_guest(run_dir, record, seconds, provider,  # type: ignore[arg-type]
                                    guest_side=guest_side)  # fmt: skip
            if output == "json":
                print(json.dumps(profile.to_json(), indent=2))
                return
            if live and console.is_terminal:
                console.clear()
            show(profile, console)
            if not live:
                return


def run_import(path: Path, address: str | None, seconds: float, output: str) -> None:
    """Show an imported ``perf kvm stat`` report like a profile kvmlab took."""
    from rich.console import Console

    from kvmlab.exits.perfkvm import import_file
    from kvmlab.exits.text import show

    if not (math.isfinite(seconds) and 0.001 <= seconds <= 1e6):
        raise UsageError(f"--seconds must be a positive window length, not {seconds:g}")
    profile = import_file(path, address or str(path), seconds)
    if output == "json":
        print(json.dumps(profile.to_json(), indent=2))
        return
    show(profile, Console())
