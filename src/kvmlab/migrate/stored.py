"""Migrations in the results database: a lab's ``[[migrations]]`` measured and stored with a
benchmark run (``kvmlab run``/``bench``, the ``migrations`` workload), and the newest stored
comparison read back as ``kvmlab migrate --mode auto``'s evidence (:mod:`.autochoice`
chooses)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kvmlab.errors import KvmlabError, printable
from kvmlab.guest.image import GuestImage
from kvmlab.migrate.autochoice import Evidence, choose, evidence, no_evidence, stored_gap
from kvmlab.migrate.compare import METRICS, Strategy, run_migrations, to_json
from kvmlab.migrate.engine_common import Workload, running_source
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.pathprobe import PathProbeFactory
from kvmlab.migrate.transports.base import Route
from kvmlab.progress import Progress
from kvmlab.results.model import MIGRATION_DOCUMENT, MIGRATION_PREFIX, Sample
from kvmlab.results.store import ResultStore, default_results_path
from kvmlab.runtime import lab as labrun
from kvmlab.spec import LoadedLab
from kvmlab.spec.migration import MigrationSpec

VERIFIED = "verified"


def samples(strategies: list[Strategy], variant: str, lab: str) -> list[Sample]:
    """The samples of a comparison: the metrics of every verified run, and the verified share."""
    out = []
    for s in strategies:
        workload, command = f"{MIGRATION_PREFIX}{s.spec.name}", s.command(lab)
        accel = s.accel or "unknown"
        for rep, outcome in enumerate(o for o in s.outcomes if o.verified):
            for name, unit, read in METRICS:
                value = read(outcome)
                if value is not None:
                    out.append(
                        Sample(
                            variant,
                            s.spec.guest,
                            "L1",
                            accel,
                            workload,
                            name,
                            float(value),
                            unit,
                            False,
                            rep,
                            command,
                        )
                    )
        if s.outcomes:
            share = 100.0 * s.verified / len(s.outcomes)
            out.append(
                Sample(
                    variant,
                    s.spec.guest,
                    "L1",
                    accel,
                    workload,
                    VERIFIED,
                    share,
                    f"% of {len(s.outcomes)} runs",
                    True,
                    0,
                    command,
                )
            )
    return out


def corrupted(strategies: list[Strategy]) -> list[str]:
    """``qemu-default: 2 of 5`` for every strategy whose completed runs failed verification."""
    found = []
    for s in strategies:
        bad = sum(1 for o in s.outcomes if o.status == "completed" and not o.verified)
        if bad:
            found.append(f"{s.spec.name}: {bad} of {len(s.outcomes)}")
    return found


def measure(
    store: ResultStore,
    run_id: int,
    variant: str,
    loaded: LoadedLab,
    host: labrun.HostAccel,
    image: Callable[[], GuestImage],
    progress: Progress,
    path_probe: PathProbeFactory | None = None,
) -> list[str]:
    """Run the variant's migrations and store them with the run (what was measured, also when
    cut short); what came out corrupted (:func:`corrupted`)."""
    strategies: list[Strategy] = []
    try:
        run_migrations(loaded, host, image, None, progress, strategies, path_probe)
    finally:  # what was measured is kept when a failure or Ctrl-C cuts the comparison short
        if any(s.outcomes for s in strategies):
            store.add(run_id, samples(strategies, variant, loaded.lab.name))
            store.add_document(run_id, variant, MIGRATION_DOCUMENT, to_json(strategies))
    return corrupted(strategies)


HISTORY_RUNS = 20
"""``auto`` by hand looks at the newest stored runs of the lab, at most this many."""


@dataclass(frozen=True)
class Conditions:
    """What a stored migration must have shared with the one ``auto`` is about to run."""

    guest: str
    workload: Workload
    bandwidth_mibs: float | None
    accel: str
    vcpus: int
    memory: int
    """Bytes."""
    source_qemu: str
    dest_qemu: str


def history(
    store: ResultStore, lab: str, conditions: Conditions
) -> tuple[list[Evidence], str] | None:
    """``auto``'s evidence by hand: the newest stored comparison of ``lab`` (among its
    :data:`HISTORY_RUNS` newest runs) with runs under ``conditions``; each strategy's runs
    and gaps, and where they come from (``stored run 12 (variant one-vcpu, 2026-11-23)``).
    None when none matches."""
    runs = sorted((r for r in store.runs() if r.lab == lab), key=lambda r: r.id, reverse=True)
    for run in runs[:HISTORY_RUNS]:
        for variant, doc in reversed(store.documents(run.id, MIGRATION_DOCUMENT)):
            listed = doc.get("strategies") if isinstance(doc, dict) else None
            found = [
                ev
                for s in _list(listed)
                if isinstance(s, dict) and (ev := _stored_evidence(s, conditions))
            ]
            if found:
                day = time.strftime("%Y-%m-%d", time.localtime(run.started))
                return found, f"stored run {run.id} (variant {variant}, {day})"
    return None


def _stored_evidence(strategy: dict[str, Any], want: Conditions) -> Evidence | None:
    try:
        spec = MigrationSpec.model_validate(strategy.get("spec"))
    except ValidationError:
        return None
    same = (
        spec.guest == want.guest
        and spec.dirty_mib == want.workload.mem_mib
        and spec.dirty_rate_mibs == want.workload.rate_mibs
        and spec.bandwidth_mibs == want.bandwidth_mibs
        and strategy.get("accel") == want.accel
        and strategy.get("vcpus") == want.vcpus
        and strategy.get("memory") == want.memory
    )
    if not same:
        return None
    outcomes = [
        o
        for o in _list(strategy.get("outcomes"))
        if isinstance(o, dict)
        and isinstance(o.get("qemu"), dict)
        and o["qemu"].get("source") == want.source_qemu
        and o["qemu"].get("destination") == want.dest_qemu
    ]
    return evidence(spec.name, Strategy(spec).settings(), map(stored_gap, outcomes))


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def auto_by_hand(
    address: str, settings: Settings, workload: Workload, route: Route
) -> tuple[Settings, str]:
    """``kvmlab migrate --mode auto``: the settings of the strategy the newest stored
    comparison of this guest under the same conditions found most reliable and pausing the
    guest least (:mod:`.autochoice`), or ``settings`` (``auto``'s in-flight rule) when
    there is none; and why. A results database it cannot read is no evidence, said so."""
    path = default_results_path()
    shown = printable(str(path))
    where = f"the results ({shown})"
    if route.to_uri is not None:
        return settings, no_evidence(f"{where} for a migration through libvirt")
    if path.is_dir():
        return settings, f"the results path {shown} is a directory, not a database"
    if not path.is_file():
        return settings, no_evidence(where)
    _, _, record = running_source(address)
    conditions = Conditions(
        guest=record.address[0],
        workload=workload,
        bandwidth_mibs=settings.bandwidth_mibs,
        accel=record.accel,
        vcpus=record.vcpus,
        memory=record.memory,
        source_qemu=record.qemu_binary,
        dest_qemu=route.dest_qemu or record.qemu_binary,
    )
    try:
        with ResultStore.reading(path) as store:  # never created, migrated or changed here
            found = history(store, record.lab, conditions)
            problems = store.problems
    except (KvmlabError, sqlite3.Error) as exc:
        # whatever a damaged database holds, auto keeps its in-flight rule and says why
        return settings, f"{where} could not be read: {printable(str(exc))[:200]}"
    if found is None and problems:  # the evidence may be in what could not be read
        return settings, f"{where} could not be read: {problems[0][:200]}"
    if found is None:
        return settings, no_evidence(where)
    candidates, source = found
    choice = choose(candidates, source)
    if choice is None:
        return settings, no_evidence(source)
    given = [
        option
        for option, value in (
            ("--downtime-limit", settings.downtime_limit_ms),
            ("--multifd-channels", settings.multifd_channels),
        )
        if value is not None
    ]
    unused = f"; not used, as only auto's fallback uses them: {', '.join(given)}" if given else ""
    return choice.settings, choice.reason + unused
