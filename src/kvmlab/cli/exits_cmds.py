"""``kvmlab exits``: the VM-exit profile of a running guest."""

from __future__ import annotations

import json
import math
import re

from kvmlab.cli.run_cmds import find_guest, interruptible
from kvmlab.errors import UsageError

_TRACEFS_NAME = re.compile(r"^kvmlab_[0-9_]{1,40}$")


def run_exits(
    address: str, seconds: float, provider: str, live: bool, output: str,
    tracefs_name: str | None, guest_side: bool = True,
) -> None:  # fmt: skip
    """Profile ``address`` for ``seconds`` (repeatedly with ``live``) and print it."""
    from rich.console import Console

    from kvmlab.exits.collect import profile_guest
    from kvmlab.exits.text import show

    if not (math.isfinite(seconds) and 0.1 <= seconds <= 3600):
        raise UsageError(f"--seconds must be between 0.1 and 3600, not {seconds:g}")
    if tracefs_name is not None and not _TRACEFS_NAME.match(tracefs_name):
        raise UsageError(f"--tracefs-name {tracefs_name!r} is not a kvmlab tracefs name")
    if live and output == "json":
        raise UsageError("--live prints tables; use -o json without --live")
    run_dir, record = find_guest(address)
    console = Console()
    with interruptible(f"profiling the VM exits of {address}"):
        while True:
            profile = profile_guest(run_dir, record, seconds, provider,  # type: ignore[arg-type]
                                    name=tracefs_name, guest_side=guest_side)  # fmt: skip
            if output == "json":
                print(json.dumps(profile.to_json(), indent=2))
                return
            if live and console.is_terminal:
                console.clear()
            show(profile, console)
            if not live:
                return
