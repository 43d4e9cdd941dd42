"""A migration's packet-path probe: what the guest's data path (a vswitch port, not its
management network) loses across the switch-over, and where.

The engine knows only this contract; the probe itself (which switch, which port, how
packets reach it) is the network domain's (:mod:`kvmlab.net.migration_path`), handed in
by the caller. A probe sends UDP at a fixed rate through the path and has the guest echo
it, like the network probe; it also counts packets at every hop the path has counters
for, so a loss is placed between two hops, and at a fixed rate a lost probe stands for a
known time.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kvmlab.progress import Progress
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord


@dataclass(frozen=True)
class HopCount:
    """Packets one hop counted over the probe's whole run (before its first probe to
    after the last one came back)."""

    name: str
    packets: int


Target = tuple[str, int, Callable[[], socket.socket]]
"""Where probes go: address, UDP port, and how to make a socket that reaches it (one in
the path's own network namespace)."""


class PathProbe(Protocol):
    """One packet-path probe of one migration (the prober is the engine's)."""

    description: str
    """The path in one line (``host -> testpmd switch port vm0 -> guest eth0 and back``)."""

    def start(self, progress: Progress) -> Target:
        """Set the path up and count every hop; where to probe
        (:class:`kvmlab.errors.KvmlabError` when the path cannot be set up)."""
        ...

    def count(self, guest: Machine) -> list[tuple[str, int]]:
        """Once probing stopped and the path drained: every hop between the prober's send
        and its receive, in path order, with the packets it counted since :meth:`start`
        (``guest`` is where the guest runs now)."""
        ...

    def own_fault(self) -> tuple[str, Target | None] | None:
        """Once the path stopped answering: why, when a part of the probe's own failed
        (a peer guest's relay gone, its link down) rather than the guest, and where the
        guest can be probed without that part (None: nowhere); None when the probe's own
        parts work."""
        ...

    def close(self, guest: Machine | None) -> None:
        """Undo everything (in ``guest`` too, where it runs now; None when nothing runs it
        after a failed postcopy); safe to call twice."""
        ...


PathProbeFactory = Callable[[Machine, Path, GuestRecord], "PathProbe | str | None"]
"""The probe for a guest (its machine, run directory and record): None when the guest has
no packet path to probe, a reason when it has one that cannot be probed."""


def hop_losses(hops: list[HopCount]) -> list[tuple[HopCount, int, int]]:
    """Each hop with the probes lost between the hop before and it, and the frames that
    are not probes seen there: a hop that counts more than the one before has frames
    joining (a migrated guest's announcements, the kernel's own), and a later hop that
    counts fewer takes those first (the prober's socket does not echo a guest's ARP).
    Returns (hop, probes lost there, frames that are not probes, joined (+) or ended
    (-) there)."""
    out = []
    previous: int | None = None
    extra = 0
    for hop in hops:
        if previous is None:
            out.append((hop, 0, 0))
        elif hop.packets >= previous:
            extra += hop.packets - previous
            out.append((hop, 0, hop.packets - previous))
        else:
            fewer = previous - hop.packets
            ended = min(fewer, extra)
            extra -= ended
            out.append((hop, fewer - ended, -ended))
        previous = hop.packets
    return out
