"""A lab's ``[[migrations]]`` as part of a benchmark run (``kvmlab run``/``bench``).

Each strategy becomes a workload of the run (``migrate <name>``) at L1, one sample per
verified repetition of every comparison metric, plus the share of runs verified; the
whole comparison (every outcome, its time series and checks) is kept as a ``migrations``
document of the run, which the HTML report plots over time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from kvmlab.errors import KvmlabError
from kvmlab.guest.image import GuestImage
from kvmlab.migrate.autochoice import Evidence, evidence, stored_gap
from kvmlab.migrate.compare import METRICS, Strategy, run_migrations, to_json
from kvmlab.migrate.engine_common import Workload
from kvmlab.results.model import MIGRATION_DOCUMENT, MIGRATION_PREFIX, Sample
from kvmlab.results.store import ResultStore
from kvmlab.runtime import lab as labrun
from kvmlab.spec import LoadedLab
from kvmlab.spec.migration import MigrationSpec

VERIFIED = "verified"


class MigrationCorrupted(KvmlabError):
    """A migration QEMU completed left its guest failing verification."""

    exit_code = 5


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
    progress: Callable[[str], None],
    detail: Callable[[str], None] | None = None,
) -> list[str]:
    """Run the variant's migrations and store them with the run (what was measured, also when
    cut short); what came out corrupted (:func:`corrupted`)."""
    strategies: list[Strategy] = []
    try:
        run_migrations(loaded, host, image, None, progress, strategies, detail)
    finally:  # what was measured is kept when a failure or Ctrl-C cuts the comparison short
        if any(s.outcomes for s in strategies):
            store.add(run_id, samples(strategies, variant, loaded.lab.name))
            store.add_document(run_id, variant, MIGRATION_DOCUMENT, to_json(strategies))
    return corrupted(strategies)


def history(
    store: ResultStore,
    lab: str,
    guest: str,
    workload: Workload,
    bandwidth_mibs: float | None,
    accel: str,
    qemu: str,
) -> tuple[list[Evidence], str] | None:
    """``auto``'s evidence by hand: the newest stored comparison of ``lab`` with verified runs
    of ``guest`` under the same workload and bandwidth, on the same accelerator and QEMU
    binary; each strategy's guest gaps, and where they come from (``run 12, variant
    one-vcpu, 2026-11-23``). None when no stored comparison matches."""
    for run in sorted(store.runs(), key=lambda r: r.id, reverse=True):
        if run.lab != lab:
            continue
        for variant, doc in reversed(store.documents(run.id, MIGRATION_DOCUMENT)):
            listed = doc.get("strategies") if isinstance(doc, dict) else None
            found = [
                ev
                for s in (listed if isinstance(listed, list) else [])
                if isinstance(s, dict)
                and (ev := _stored_evidence(s, guest, workload, bandwidth_mibs, accel, qemu))
            ]
            if found:
                day = time.strftime("%Y-%m-%d", time.localtime(run.started))
                return found, f"stored run {run.id} (variant {variant}, {day})"
    return None


def _stored_evidence(
    strategy: dict[str, Any],
    guest: str,
    workload: Workload,
    bandwidth_mibs: float | None,
    accel: str,
    qemu: str,
) -> Evidence | None:
    try:
        spec = MigrationSpec.model_validate(strategy.get("spec"))
    except ValidationError:
        return None
    same = (
        spec.guest == guest
        and spec.dirty_mib == workload.mem_mib
        and spec.dirty_rate_mibs == workload.rate_mibs
        and spec.bandwidth_mibs == bandwidth_mibs
        and strategy.get("accel") == accel
    )
    if not same:
        return None
    outcomes = [
        o
        for o in _list(strategy.get("outcomes"))
        if isinstance(o, dict)
        and isinstance(o.get("qemu"), dict)
        and o["qemu"].get("source") == qemu
    ]
    return evidence(spec.name, Strategy(spec).settings(), map(stored_gap, outcomes))


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
