"""``migrate --compare-pages``: at the switch-over, with the source paused and the
destination held paused, every page of guest RAM is compared on both sides
(:mod:`kvmlab.migrate.pages`), then the destination runs. The pause is measured and
reported beside the downtime figures, which include it.

``KVMLAB_AT_SWITCHOVER`` names a program run (no shell) just before the comparison, with the
destination's and the source's QEMU pids as arguments: a way to look at (or, to prove the
comparison, alter) the paused destination from outside kvmlab.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from kvmlab.errors import KvmlabError, printable
from kvmlab.migrate.guestside import Check
from kvmlab.migrate.pages import PageCompare, differing, hashed_ram, ram_ranges
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.transports.base import AnyTransport, PageSides
from kvmlab.progress import Progress

HOOK_ENV = "KVMLAB_AT_SWITCHOVER"
HOOK_SECONDS = 120
CHECK = "guest RAM pages"


def compare_at_switchover(transport: AnyTransport, outcome: Outcome, progress: Progress) -> None:
    """Compare both sides' guest RAM, then let the destination run (also when the
    comparison could not be made: it then fails the verdict, saying why)."""
    progress.step("comparing every page of guest RAM on both sides (the destination waits)")
    result = PageCompare()
    t0 = time.monotonic()
    try:
        sides = transport.page_sides()
        result.ranges = ram_ranges(sides.mtree)
        if not result.ranges:
            raise OSError("the source's memory map (info mtree -f) shows no RAM")
        _run_hook(sides)
        source = hashed_ram(sides.source, result.ranges, sides.scratch / "pages-source.fifo")
        dest = hashed_ram(sides.dest, result.ranges, sides.scratch / "pages-dest.fifo")
        result.compared = len(source)
        result.differing = differing(result.ranges, source, dest)
    except (OSError, KvmlabError) as exc:
        result.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    finally:
        try:
            transport.resume_destination()
        finally:
            result.pause_s = time.monotonic() - t0
            outcome.pages = result
    outcome.checks_after.append(Check(CHECK, result.ok, result.evidence(), result.pause_s))
    progress.step(f"{result.evidence()} (the guest paused {result.pause_s:.1f} s for it)")


def _run_hook(sides: PageSides) -> None:
    """The program ``KVMLAB_AT_SWITCHOVER`` names, run with both QEMUs paused."""
    program = os.environ.get(HOOK_ENV)
    if not program:
        return
    if not Path(program).is_absolute():
        raise OSError(f"{HOOK_ENV}={printable(program)}: give the program's absolute path")
    try:
        done = subprocess.run(
            [program, str(sides.dest_pid), str(sides.source_pid)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=HOOK_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OSError(f"{HOOK_ENV} {printable(program)}: {exc}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise OSError(
            f"{HOOK_ENV} {printable(program)} exited {done.returncode}"
            + (f": {printable(tail[0])}" if tail else "")
        )
