"""``auto`` by what the guest lives: the strategy whose verified migrations of the same guest
under the same workload paused the guest least, as measured on this host.

QEMU's own downtime figure leaves out what a guest lives after the switch-over (postcopy's
page faults over the network, the destination's first moments, the address moving), so
``auto`` judges each candidate by its **guest gap**: per verified run, the longer of the
heartbeats' gap and the network probe's gap (the worse of the two pauses the guest or its
peers saw), and per strategy the median over its runs. The evidence comes from the
comparison in progress (``kvmlab migrate --lab``, where ``auto`` runs after the fixed
strategies of each round) or, for ``kvmlab migrate --mode auto`` by hand, from the newest
comparison of the same lab stored by ``kvmlab run``. Without evidence, ``auto`` falls back
to its in-flight rule (QEMU's expected downtime against a target, then postcopy) and says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kvmlab.migrate.modes import Settings
from kvmlab.migrate.result import Outcome


@dataclass(frozen=True)
class Evidence:
    """One fixed strategy's verified runs of the guest under the workload ``auto`` faces."""

    name: str
    settings: Settings
    gaps_ms: tuple[float, ...]
    """The guest gap of each verified run (see :func:`guest_gap`)."""

    @property
    def median_ms(self) -> float:
        """The median guest gap."""
        return statistics.median(self.gaps_ms)


@dataclass(frozen=True)
class Choice:
    """What ``auto`` runs, and the one line that says why."""

    name: str
    settings: Settings
    reason: str


def guest_gap(heartbeats_ms: float | None, network_ms: float | None) -> float | None:
    """The pause a run's guest lived: the longer of the two measures it has (None: neither)."""
    seen = [v for v in (heartbeats_ms, network_ms) if v is not None]
    return max(seen) if seen else None


def outcome_gap(outcome: Outcome) -> float | None:
    """:func:`guest_gap` of a verified outcome; None for any other."""
    if not outcome.verified:
        return None
    return guest_gap(outcome.guest_downtime_ms, outcome.network_downtime_ms)


def stored_gap(outcome: dict[str, Any]) -> float | None:
    """:func:`guest_gap` of a stored outcome (its ``-o json`` form) if it was verified."""
    if outcome.get("verdict") != "VERIFIED":
        return None
    heartbeats = outcome.get("guest_downtime_ms")
    net = outcome.get("network")
    network = net.get("downtime_ms") if isinstance(net, dict) else None
    return guest_gap(
        float(heartbeats) if isinstance(heartbeats, int | float) else None,
        float(network) if isinstance(network, int | float) else None,
    )


def evidence(name: str, settings: Settings, gaps: Iterable[float | None]) -> Evidence | None:
    """The evidence of one strategy, or None when it has no verified run with a gap (or is
    ``auto`` itself, which is never evidence for ``auto``)."""
    kept = tuple(g for g in gaps if g is not None)
    if settings.mode == "auto" or not kept:
        return None
    return Evidence(name, settings, kept)


def choose(candidates: Sequence[Evidence], auto: Settings, where: str) -> Choice | None:
    """The candidate with the lowest median guest gap (ties: more runs, then the name), run
    with ``auto``'s own time limit and timeout action; None when there is no candidate.

    ``where`` names the evidence (``this comparison``, ``run 12``) in the reason.
    """
    if not candidates:
        return None
    ranked = sorted(candidates, key=lambda e: (e.median_ms, -len(e.gaps_ms), e.name))
    best = ranked[0]
    others = ", ".join(f"{e.name} {e.median_ms:.0f} ms/{len(e.gaps_ms)}" for e in ranked[1:])
    mode = best.settings.mode
    label = best.name if best.name == mode else f"{best.name} ({mode})"
    reason = (
        f"{label} by the guest's gap in {where}: median "
        f"{best.median_ms:.0f} ms over {len(best.gaps_ms)} verified run(s)"
        + (f" (then {others})" if others else " (the only strategy measured)")
    )
    settings = replace(best.settings, max_seconds=auto.max_seconds, on_timeout=auto.on_timeout)
    return Choice(best.name, settings, reason)


def no_evidence(where: str) -> str:
    """The reason ``auto`` gives when it falls back to its in-flight rule."""
    return f"no verified migration of this guest under this workload in {where}"
