"""How long kvmlab waits: on progress, not on the clock, with ceilings that scale.

Hosts differ in speed by far more than 2x (a loaded CI runner, a laptop on battery, TCG
inside TCG), so a wait that a guest visibly progresses through (new serial output, boot
markers, QEMU's CPU time advancing) ends only on a *stall*: no progress for the stall
limit. A ceiling still bounds it, scaled by the level's measured speed
(:func:`level_factor`, from the guest's own boot). Every limit has a name; the
environment overrides it (``KVMLAB_STALL_BOOT=600``, ``KVMLAB_CEILING_BOOT=7200``), and
the error of one that expires says which it was, what progress was last seen, and the
variable that raises it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from kvmlab.errors import RuntimeFailure, UsageError, printable


@dataclass(frozen=True)
class Limit:
    """A named wait: ``stall`` seconds without progress, ``ceiling`` seconds in all (before
    scaling); ``what`` says what it bounds."""

    name: str
    stall: float
    ceiling: float
    what: str

    def env(self, kind: str) -> str:
        """The environment variable that overrides one of its values."""
        return f"KVMLAB_{kind.upper()}_{self.name.upper().replace('-', '_')}"

    def value(self, kind: Literal["stall", "ceiling"], factor: float = 1.0) -> float:
        """The stall limit, or the ceiling scaled by ``factor``; the environment wins."""
        raw = os.environ.get(self.env(kind))
        if not raw:
            return self.stall if kind == "stall" else self.ceiling * factor
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not 0 < value <= MAX_SECONDS:
            shown = raw if len(raw) <= 40 else raw[:37] + "..."
            raise UsageError(
                f"{self.env(kind)}={printable(repr(shown))}: give a number of "
                f"seconds above 0 and at most {MAX_SECONDS:g}"
            )
        return value

    def exceeded(self, subject: str, seconds: float, detail: str = "") -> Stalled:
        """The error for a wait bounded by this limit's ceiling that took ``seconds``."""
        more = f"; {detail}" if detail else ""
        return Stalled(
            f"{subject}: not done after {seconds:g} s (limit {self.name!r}: "
            f"{self.what}{more}); raise it with {self.env('ceiling')}=SECONDS"
        )


LIMITS = {
    limit.name: limit
    for limit in (
        Limit("qmp", 60, 120, "QEMU's monitor socket answering after QEMU started"),
        Limit(
            "boot",
            120,
            1200,
            "a guest booting until its agent answers (progress: serial "
            "output, boot markers, QEMU's CPU time)",
        ),
        Limit("agent", 60, 120, "a running guest's agent answering before a command"),
        Limit(
            "setup", 60, 60, "guest-side set-up after boot: disk mounts, network, kvmlab-* programs"
        ),
        Limit(
            "inner-up",
            300,
            900,
            "'kvmlab up' inside a guest hypervisor starting its guests "
            "(progress: the hypervisor's QEMU CPU time)",
        ),
        Limit("inner-down", 120, 300, "'kvmlab down' inside a guest hypervisor"),
        Limit(
            "libvirt-connect",
            30,
            30,
            "a libvirtd answering a new connection (a handshake shows no progress: a fixed "
            "bound; an ssh URI's password prompt counts against it)",
        ),
    )
}
"""Every wait kvmlab bounds; ``docs/timeouts.md`` lists them (generated from here)."""

MAX_SECONDS = 1e6
"""The largest limit the environment may set (11 days): beyond it is a typo, not a wait."""


def check_environment() -> None:
    """Read every limit the environment sets, so a bad one is refused before anything
    starts (not when the wait it bounds begins, with QEMU already running)."""
    for limit in LIMITS.values():
        limit.value("stall")
        limit.value("ceiling")


REFERENCE_BOOT_S = 5.0
"""A one-vCPU TCG guest of the default image reaches its agent in ~5 s on the machine these
limits were set on; a level that boots slower gets proportionally longer ceilings."""


def level_factor(boot: dict[str, float]) -> float:
    """How much slower than the reference a guest is, from its measured boot stages (>= 1)."""
    total = boot.get("total")
    return max(1.0, total / REFERENCE_BOOT_S) if total else 1.0


class Stalled(RuntimeFailure):
    """A bounded wait ended: no progress for the stall limit, or the ceiling was reached."""


@dataclass
class Watch:
    """Progress of one wait: probes sampled on each :meth:`poll`; a changed value is progress.

    ``probes`` map a description (``"serial output"``) to a function returning any value
    that changes when there is progress (a byte count, a CPU-second step).
    """

    limit: Limit
    subject: str
    probes: dict[str, Callable[[], object]]
    factor: float = 1.0
    start: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.stall = self.limit.value("stall")
        self.ceiling = self.limit.value("ceiling", self.factor)
        self.last = {name: probe() for name, probe in self.probes.items()}
        self.progress_at = self.start
        self.seen = "nothing yet"

    def poll(self) -> None:
        """Sample the probes; raise :class:`Stalled` when a limit has expired."""
        now = time.monotonic()
        for name, probe in self.probes.items():
            value = probe()
            if value != self.last[name]:
                self.last[name] = value
                self.progress_at = now
                self.seen = f"{name} at {now - self.start:.0f} s"
        if now - self.progress_at > self.stall:
            self._expired("stall", f"no progress for {self.stall:g} s")
        if now - self.start > self.ceiling:
            self._expired("ceiling", f"not done after {self.ceiling:g} s")

    def _expired(self, kind: str, how: str) -> None:
        raise Stalled(
            f"{self.subject}: {how} (limit {self.limit.name!r}: {self.limit.what}; last "
            f"progress: {self.seen}); raise it with {self.limit.env(kind)}=SECONDS"
        )


def cpu_steps(read: Callable[[], float | None], step: float = 5.0) -> Callable[[], object]:
    """A probe that changes each time ``read()`` (CPU seconds) advances by ``step``.

    An idle guest's QEMU uses a little CPU all the time; counting whole steps keeps that
    from passing for progress while a busy one (booting) moves a step every few seconds.
    """

    def probe() -> object:
        value = read()
        return None if value is None else int(value // step)

    return probe


def limits_markdown() -> str:
    """The table of limits for ``docs/timeouts.md``."""
    rows = [
        "| limit | stall (s) | ceiling (s, x level factor) | what it bounds | override |",
        "|---|---|---|---|---|",
    ]
    for limit in LIMITS.values():
        rows.append(
            f"| `{limit.name}` | {limit.stall:g} | {limit.ceiling:g} | {limit.what} | "
            f"`{limit.env('stall')}`, `{limit.env('ceiling')}` |"
        )
    return "\n".join(rows) + "\n"


DOC_INTRO = """# Waits and their limits

kvmlab waits on progress, not on the clock: a guest that is booting (new serial output,
boot markers, its QEMU's CPU time advancing) or a command inside a guest hypervisor that
keeps it busy is waited for until it *stalls* (no progress for the stall limit). A ceiling
still bounds every wait; it is multiplied by the level's measured speed factor (the guest's
boot time against a 5 s reference boot of a one-vCPU TCG guest, at least 1), so a host or a
level that is 3x slower gets 3x longer ceilings. Each limit can be set in the environment;
an expired one says which it was, what progress was last seen and which variable raises it.

"""


DOC_WORKLOADS = """
Benchmark steps inside a guest (`kvmlab bench`, `kvmlab run`) are time-based commands with
a limit of their own length plus a margin (sysbench and iperf3: duration + 60 s; fio:
2 x duration + 120 s; ping: 0.2 s per echo + 30 s), multiplied by the level factor of the
guest they run in, so a slow level gets the time its tools need to start.
"""


def timeouts_doc() -> str:
    """``docs/timeouts.md``: ``python -m kvmlab.runtime.waits > docs/timeouts.md``."""
    return (
        DOC_INTRO
        + limits_markdown()
        + DOC_WORKLOADS
        + "\nGenerated from `kvmlab.runtime.waits.LIMITS` (`make docs`).\n"
    )


if __name__ == "__main__":
    print(timeouts_doc(), end="")
