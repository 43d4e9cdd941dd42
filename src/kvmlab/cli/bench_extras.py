"""What a lab declares beyond the suite, inside ``kvmlab run``/``bench``: PVP through its
``[switch]`` and its ``[[migrations]]``; chosen, run after each variant's suite, checked."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmlab.errors import UsageError
from kvmlab.net.netcompare import plan_paths
from kvmlab.spec import LoadedLab, VhostUserNic

if TYPE_CHECKING:
    from kvmlab.bench.runner import LevelRunner
    from kvmlab.runtime.lab import Launch

MIGRATIONS, PVP, NETCOMPARE = "migrations", "pvp", "netcompare"
OWN = (MIGRATIONS, PVP, NETCOMPARE)


@dataclass
class Extras:
    """Which of the lab's own workloads a run executes, and what came out corrupted."""

    migrations: bool
    pvp: bool
    levels: set[str]
    netcompare: bool = False
    corrupted: list[str] = field(default_factory=list)

    @property
    def wanted(self) -> bool:
        """Whether anything beyond the suite runs."""
        return self.migrations or self.pvp or self.netcompare

    def describe(self, loaded: LoadedLab) -> str:
        """``; PVP through the switch; the lab's 5 [[migrations]]`` (or nothing)."""
        parts = []
        if self.pvp and loaded.lab.switch is not None:
            parts.append(f"PVP through the {loaded.lab.switch.kind} switch")
        if self.migrations:
            parts.append(f"the lab's {len(loaded.lab.migrations)} [[migrations]]")
        if self.netcompare:
            parts.append("netcompare over the lab's network paths")
        return "".join(f"; {p} after the suite" for p in parts)

    def after(
        self, launch: Launch, status: Callable[[str], None], reps: int
    ) -> Callable[[LevelRunner, LoadedLab], None] | None:
        """The hook :func:`kvmlab.bench.session.run_bench` calls after each variant's suite
        (PVP's and netcompare's guests run on ``launch.backend``)."""
        if not self.wanted:
            return None

        def run(runner: LevelRunner, variant: LoadedLab) -> None:
            shown = "" if runner.variant == "default" else f"{runner.variant} "
            if self.pvp:
                from kvmlab.net.pvp_run import run_pvp

                start = time.monotonic()
                run_pvp(
                    variant,
                    runner.variant,
                    self.levels,
                    reps,
                    launch,
                    runner.at,
                    lambda got: runner.store.add(runner.run_id, got),
                )
                runner.timings[f"{shown}pvp"] = time.monotonic() - start
            if self.netcompare:
                from kvmlab.net.netcompare_run import run_netcompare

                start = time.monotonic()
                from kvmlab.net.netcompare import DOCUMENT

                def keep(doc: dict[str, Any]) -> None:
                    runner.store.add_document(runner.run_id, runner.variant, DOCUMENT, doc)

                run_netcompare(
                    variant,
                    runner.variant,
                    reps,
                    launch,
                    runner.at,
                    lambda got: runner.store.add(runner.run_id, got),
                    keep,
                )
                runner.timings[f"{shown}netcompare"] = time.monotonic() - start
            if self.migrations:
                from kvmlab.migrate.stored import measure
                from kvmlab.net.migration_path import packet_path

                guests = ", ".join(dict.fromkeys(m.guest for m in variant.lab.migrations))
                runner.at("L1", guests, MIGRATIONS)
                start = time.monotonic()
                found = measure(
                    runner.store,
                    runner.run_id,
                    runner.variant,
                    variant,
                    launch.host,
                    launch.image,
                    launch.progress,
                    status,
                    packet_path,
                )
                runner.timings[f"{shown}migrations"] = time.monotonic() - start
                self.corrupted.extend(f"{shown.replace(' ', ': ')}{f}" for f in found)

        return run


def split_only(
    loaded: LoadedLab, only: str | None, levels: set[str]
) -> tuple[list[str] | None, bool, Extras]:
    """``--only`` (else the lab's ``[bench] workloads`` when it names ``pvp``,
    ``migrations`` or ``netcompare``) split into the suite's workloads and the lab's own.

    Returns the suite's ``--only`` list (None: the suite's own), whether the suite runs at
    all, and the extras: each runs when the lab declares it and the levels fit, unless the
    selection leaves it out. Asking for one the lab lacks, or without its level, is refused.
    """
    names = [w.strip() for w in only.split(",") if w.strip()] if only else None
    lab = loaded.lab
    own = list(lab.bench.workloads)
    # a lab's list that names none of its own workloads selects among the suite's only
    picked = names if names is not None else (own if set(own) & set(OWN) else None)
    declared = {
        MIGRATIONS: bool(lab.migrations),
        PVP: lab.switch is not None,
        NETCOMPARE: bool(plan_paths(lab)),
    }
    if (
        picked is None
        and not lab.networks
        and not any(
            isinstance(n, VhostUserNic) and n.address for g in lab.guests.values() for n in g.nics
        )
    ):
        declared[NETCOMPARE] = False  # user NICs alone: only when asked for
    need = {MIGRATIONS: {"L1"}, PVP: {"L0", "L1"}, NETCOMPARE: {"L1"}}
    whats = {
        MIGRATIONS: "[[migrations]]",
        PVP: "[switch]",
        NETCOMPARE: "network path (user NIC, [networks], addressed switch port)",
    }
    for name in OWN:
        if picked is None or name not in picked:
            continue
        what = whats[name]
        if not declared[name]:
            if names is None:
                raise UsageError(
                    f"{loaded.path}: bench.workloads names {name}, but the lab declares no {what}"
                )
            raise UsageError(f"--only {name}: {loaded.path} declares no {what}")
        if names is not None and not need[name] & levels:
            raise UsageError(
                f"--only {name}: needs level {' or '.join(sorted(need[name]))} in --levels"
            )
    run = {
        n: declared[n] and bool(need[n] & levels) and (picked is None or n in picked) for n in OWN
    }
    suite = None if names is None else [w for w in names if w not in OWN]
    suite_runs = suite != [] and (names is not None or not own or any(w not in OWN for w in own))
    return (
        suite or None,
        suite_runs,
        Extras(run[MIGRATIONS], run[PVP], set(levels), run[NETCOMPARE]),
    )
