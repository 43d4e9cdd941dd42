"""``auto`` by what the guest lives: the strategy whose verified migrations of the same guest
under the same workload paused the guest least, as measured on this host.

QEMU's own downtime figure leaves out what a guest lives after the switch-over (postcopy's
page faults over the network, the destination's first moments, the address moving), so
``auto`` judges each candidate first by how often it kept the guest intact (the share of its
runs verified: a strategy that broke the guest is never preferred to one that did not),
then by its **guest gap**: per verified run, the longer of the heartbeats' gap and the
network probe's gap (the worse of the two pauses the guest or its peers saw), and per
strategy the median over its runs. The chosen strategy runs with its own settings, time
limit and timeout action included: what was measured is what runs. The evidence comes from the
comparison in progress (``kvmlab migrate --lab``, where ``auto`` runs after the fixed
strategies of each round) or, for ``kvmlab migrate --mode auto`` by hand, from the newest
comparison of the same lab stored by ``kvmlab run``. Without evidence, ``auto`` falls back
to its in-flight rule (QEMU's expected downtime against a target, then postcopy) and says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kvmlab.migrate.modes import Settings
from kvmlab.migrate.result import Outcome


@dataclass(frozen=True)
class Evidence:
    """One fixed strategy's runs of the guest under the workload ``auto`` faces."""

    name: str
    settings: Settings
    gaps_ms: tuple[float, ...]
    """The guest gap of each verified run (see :func:`guest_gap`)."""
    runs: int
    """Every run it had, verified or not."""

    @property
    def median_ms(self) -> float:
        """The median guest gap."""
        return statistics.median(self.gaps_ms)

    @property
    def verified_share(self) -> float:
        """The share of its runs that were verified."""
        return len(self.gaps_ms) / self.runs

    def summary(self) -> str:
        """``multifd 64 ms (5 of 5 verified)``."""
        return f"{self.name} {self.median_ms:.0f} ms ({len(self.gaps_ms)} of {self.runs} verified)"


@dataclass(frozen=True)
class Choice:
    """What ``auto`` runs, and the one line that says why."""

    name: str
    settings: Settings
    reason: str


def _measure(value: object) -> float | None:
    """A gap as measured: a finite, non-negative number of ms (a bool or anything else is
    no measure, whatever a stored document says)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def guest_gap(heartbeats_ms: object, network_ms: object) -> float | None:
    """The pause a run's guest lived: the longer of the measures it has (None: neither)."""
    seen = [v for v in (_measure(heartbeats_ms), _measure(network_ms)) if v is not None]
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
    net = outcome.get("network")
    network = net.get("downtime_ms") if isinstance(net, dict) else None
    return guest_gap(outcome.get("guest_downtime_ms"), network)


def evidence(name: str, settings: Settings, gaps: Iterable[float | None]) -> Evidence | None:
    """The evidence of one strategy from each of its runs' gaps (None: a run that was not
    verified, or had no gap), or None when no run has a gap (or it is ``auto`` itself,
    which is never evidence for ``auto``)."""
    every = list(gaps)
    kept = tuple(g for g in every if g is not None)
    if settings.mode == "auto" or not kept:
        return None
    return Evidence(name, settings, kept, len(every))


def choose(candidates: Sequence[Evidence], where: str) -> Choice | None:
    """The candidate that kept the guest intact most often and, among those, paused it
    least (median gap; ties: more verified runs, then the name); None when there is none.

    ``where`` names the evidence (``this comparison``, ``stored run 12 ...``) in the reason.
    """
    if not candidates:
        return None
    ranked = sorted(
        candidates,
        key=lambda e: (-e.verified_share, e.median_ms, -len(e.gaps_ms), e.name),
    )
    best = ranked[0]
    mode = best.settings.mode
    label = best.name if best.name == mode else f"{best.name} ({mode})"
    others = "; ".join(e.summary() for e in ranked[1:])
    reason = (
        f"{label} by the guest's gap in {where}: median {best.median_ms:.0f} ms, "
        f"{len(best.gaps_ms)} of {best.runs} run(s) verified"
        + (f" (the others: {others})" if others else " (the only strategy measured)")
    )
    return Choice(best.name, best.settings, reason)


def no_evidence(where: str) -> str:
    """The reason ``auto`` gives when it falls back to its in-flight rule."""
    return f"no verified migration of this guest under this workload in {where}"
