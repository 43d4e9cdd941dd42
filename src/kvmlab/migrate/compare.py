"""A lab's ``[[migrations]]`` run side by side: strategies alternate, repetitions summarised.

The lab is brought up for the comparison and down after it. A migration that leaves its
guest dead (corruption, a lost postcopy) counts as it ended and the lab is brought up
again before the next one, so one bad run never takes the others with it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvmlab.errors import KvmlabError
from kvmlab.guest.image import GuestImage
from kvmlab.jsondoc import envelope
from kvmlab.migrate.autochoice import choose, evidence, no_evidence, outcome_gap
from kvmlab.migrate.engine import migrate
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.pathprobe import PathProbeFactory
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.workload import Workload
from kvmlab.progress import QUIET, Progress
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.machine import Machine, MachineConfig
from kvmlab.runtime.rundir import LabDir
from kvmlab.spec import LoadedLab
from kvmlab.spec.migration import MigrationSpec

METRICS: tuple[tuple[str, str, Callable[[Outcome], float | None]], ...] = (
    ("total time", "ms", lambda o: o.final.times.get("total-time") if o.final else None),
    ("QEMU downtime", "ms", lambda o: o.final.times.get("downtime") if o.final else None),
    ("guest downtime", "ms", lambda o: o.guest_downtime_ms),
    ("network downtime", "ms", lambda o: o.network_downtime_ms),
    ("probes lost", "probes", lambda o: o.network_probes[1] if o.network_probes else None),
    ("packet-path downtime", "ms", lambda o: o.packet_downtime_ms),
    (
        "packet probes lost",
        "probes",
        lambda o: o.packet_probes[1] if o.packet_probes else None,
    ),
    (
        "transferred",
        "MiB",
        lambda o: (
            o.final.ram["transferred"] / 1048576
            if o.final and "transferred" in o.final.ram
            else None
        ),
    ),
    ("dirty syncs", "passes", lambda o: o.final.ram.get("dirty-sync-count") if o.final else None),
)
"""What the comparison reports per strategy: name, unit, how it is read from an outcome."""


@dataclass
class Strategy:
    """One ``[[migrations]]`` entry and its outcomes."""

    spec: MigrationSpec
    outcomes: list[Outcome] = field(default_factory=list)
    accel: str = ""
    """How the guest ran (``kvm``, ``tcg``), as the lab brought it up."""
    shape: tuple[int, int] | None = None
    """The guest's vCPUs and memory (bytes), as the lab brought it up."""

    def settings(self) -> Settings:
        """The session settings for this entry."""
        s = self.spec
        return Settings(
            mode=s.mode,
            downtime_limit_ms=s.downtime_limit_ms,
            bandwidth_mibs=s.bandwidth_mibs,
            multifd_channels=s.multifd_channels,
            postcopy_after_pass=s.postcopy_after,
            max_seconds=s.max_seconds,
            on_timeout=s.on_timeout,
        )

    def summary(self, name: str) -> tuple[float, float, float, int] | None:
        """Median, min, max and count of one metric over the verified runs."""
        read = next(f for n, _, f in METRICS if n == name)
        values = [v for o in self.outcomes if o.verified and (v := read(o)) is not None]
        if not values:
            return None
        return statistics.median(values), min(values), max(values), len(values)

    def command(self, lab: str) -> str:
        """The ``kvmlab migrate`` command that runs this entry once by hand."""
        s = self.spec
        words = [
            f"kvmlab migrate {lab}/{s.guest} --mode {s.mode}",
            f"--dirty {s.dirty_rate_mibs:g} --dirty-mem {s.dirty_mib}",
        ]
        if s.downtime_limit_ms is not None:
            words.append(f"--downtime-limit {s.downtime_limit_ms}")
        if s.bandwidth_mibs is not None:
            words.append(f"--bandwidth {s.bandwidth_mibs:g}")
        if s.multifd_channels is not None:
            words.append(f"--multifd-channels {s.multifd_channels}")
        if s.mode == "postcopy" and s.postcopy_after != 1:
            words.append(f"--postcopy-after {s.postcopy_after}")
        words.append(f"--max-time {s.max_seconds:g} --on-timeout {s.on_timeout}")
        return " ".join(words)

    @property
    def verified(self) -> int:
        """How many runs were verified."""
        return sum(1 for o in self.outcomes if o.verified)


def run_migrations(
    loaded: LoadedLab,
    host: labrun.HostAccel,
    image: Callable[[], GuestImage],
    reps: int | None = None,
    progress: Progress = QUIET,
    strategies: list[Strategy] | None = None,
    path_probe: PathProbeFactory | None = None,
) -> list[Strategy]:
    """Bring the lab up, run every declared migration ``reps`` times (default: each its own
    ``repetitions``) in rotating order, bring it down; the strategies with their outcomes.

    Outcomes are appended to ``strategies`` (when given) as they come, so a caller keeps
    what was measured when the comparison is cut short. ``progress`` hears of each run and
    its verdict as a stage, of each step of the lab and migrations as detail.
    ``path_probe``: how a guest's packet path is probed (:mod:`.pathprobe`).
    """
    detail = progress.as_detail()
    if strategies is None:
        strategies = []
    strategies[:] = [Strategy(m) for m in loaded.lab.migrations]
    rounds = max(reps or s.spec.repetitions for s in strategies)
    lab = loaded.lab.name
    launch = labrun.Launch(host, image, progress=detail)
    machines = _guests(labrun.up(loaded, launch))
    fresh = True
    try:
        for rep in range(rounds):
            for strategy in round_order(strategies, rep):
                if len(strategy.outcomes) >= (reps or strategy.spec.repetitions):
                    continue
                spec = strategy.spec
                address = f"{lab}/{spec.guest}"
                if not fresh or not _running(lab, spec.guest):
                    progress.step(
                        f"{address} did not come through the last migration intact: "
                        "bringing the lab up again"
                    )
                    labrun.down(lab, force=True, progress=detail)
                    machines = _guests(labrun.up(loaded, launch))
                if (machine := machines.get(spec.guest)) is not None:
                    strategy.accel = machine.accel
                    strategy.shape = (machine.vcpus, machine.memory)
                progress.detail(f"{spec.name}: run {len(strategy.outcomes) + 1}")
                settings, reason = auto_settings(strategy, strategies)
                try:
                    outcome = migrate(
                        address,
                        settings,
                        Workload(spec.dirty_mib, spec.dirty_rate_mibs),
                        detail,
                        auto_reason=reason,
                        path_probe=path_probe,
                    )
                except KvmlabError as exc:  # one broken attempt does not end the comparison
                    outcome = Outcome(
                        address, spec.mode, status="failed", error=str(exc), choice=reason
                    )
                strategy.outcomes.append(outcome)
                if outcome.interrupted:
                    raise KeyboardInterrupt  # the user's Ctrl-C ends the comparison
                fresh = intact(outcome)
                progress.step(
                    f"{address} {spec.name} run {len(strategy.outcomes)}: "
                    f"{outcome.verdict}{_figures(outcome)}"
                )
    finally:
        labrun.down(lab, force=True, progress=detail)
    return strategies


def round_order(strategies: list[Strategy], rep: int) -> list[Strategy]:
    """One round: the fixed strategies, rotated by the round so none always goes first, then
    every ``auto`` (it chooses by what the fixed ones measured so far)."""
    fixed = [s for s in strategies if s.spec.mode != "auto"]
    autos = [s for s in strategies if s.spec.mode == "auto"]
    if fixed:
        fixed = fixed[rep % len(fixed) :] + fixed[: rep % len(fixed)]
    return fixed + autos


def auto_settings(strategy: Strategy, strategies: list[Strategy]) -> tuple[Settings, str | None]:
    """What ``strategy`` runs with: its own settings; for ``auto``, those of the fixed
    strategy of the same guest, workload and bandwidth that this comparison found most
    reliable and, among those, pausing the guest least (:mod:`.autochoice`), and why (or
    why it falls back to its in-flight rule)."""
    own = strategy.settings()
    if strategy.spec.mode != "auto":
        return own, None
    candidates = []
    for other in strategies:
        if not _same_conditions(strategy.spec, other.spec):
            continue
        found = evidence(other.spec.name, other.settings(), map(outcome_gap, other.outcomes))
        if found is not None:
            candidates.append(found)
    choice = choose(candidates, "this comparison")
    if choice is not None:
        return choice.settings, choice.reason
    fixed = [o for o in strategies if o.spec.mode != "auto"]
    if not any(_same_conditions(strategy.spec, o.spec) for o in fixed):
        return own, (
            "no fixed strategy of this guest under this workload in this comparison to judge by"
        )
    return own, no_evidence("this comparison yet")


def _same_conditions(auto: MigrationSpec, other: MigrationSpec) -> bool:
    """Whether ``other`` migrated the same guest under what ``auto`` will face."""
    return (
        other.guest == auto.guest
        and other.dirty_mib == auto.dirty_mib
        and other.dirty_rate_mibs == auto.dirty_rate_mibs
        and other.bandwidth_mibs == auto.bandwidth_mibs
    )


def _figures(outcome: Outcome) -> str:
    """`` (total 2740 ms, QEMU downtime 31 ms, guest downtime 70 ms, network downtime 95 ms)``
    of a verified run."""
    if not outcome.verified:
        return ""
    shown = [(n, read(outcome), u) for n, u, read in METRICS[:4]]
    return " (" + ", ".join(f"{n} {v:.0f} {u}" for n, v, u in shown if v is not None) + ")"


def _guests(machines: list[Machine]) -> dict[str, MachineConfig]:
    return {m.config.address[-1]: m.config for m in machines}


def intact(outcome: Outcome) -> bool:
    """Whether the guest is known to be whole after ``outcome`` (wherever it now runs)."""
    if outcome.verified:
        return True
    return (
        outcome.status in ("cancelled", "failed")
        and not outcome.lost
        and bool(outcome.source_checks)
        and all(c.ok for c in outcome.source_checks)
    )


def _running(lab: str, guest: str) -> bool:
    for entry in LabDir.of(lab).entries():
        if entry.address == (guest,):
            return entry.state() == "running"
    return False


def table(strategies: list[Strategy]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: per strategy, verified runs and each metric's median (min-max)."""
    header = ["strategy", "verified", *(f"{n} ({u})" for n, u, _ in METRICS)]
    rows = []
    for s in strategies:
        row = [f"{s.spec.name} ({s.spec.mode})", f"{s.verified}/{len(s.outcomes)}"]
        for name, _, _ in METRICS:
            got = s.summary(name)
            row.append("-" if got is None else f"{got[0]:.0f} ({got[1]:.0f}-{got[2]:.0f})")
        rows.append(row)
    return header, rows


def to_json(strategies: list[Strategy]) -> dict[str, Any]:
    """The comparison as ``kvmlab migrate LAB -o json`` prints it."""
    out: dict[str, Any] = envelope("migrations", {"strategies": []})
    for s in strategies:
        summary = {}
        for name, unit, _ in METRICS:
            got = s.summary(name)
            summary[name] = (
                None
                if got is None
                else {"unit": unit, "median": got[0], "min": got[1], "max": got[2], "n": got[3]}
            )
        out["strategies"].append(
            {
                "name": s.spec.name,
                "spec": s.spec.model_dump(),
                "accel": s.accel,
                "vcpus": s.shape[0] if s.shape else None,
                "memory": s.shape[1] if s.shape else None,
                "verified": s.verified,
                "runs": len(s.outcomes),
                "summary": summary,
                "outcomes": [o.to_json() for o in s.outcomes],
            }
        )
    return out
