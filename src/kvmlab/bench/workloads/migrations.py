"""The ``migrations`` workload: a lab's ``[[migrations]]`` after each variant's suite, each
stored as workload ``migrate NAME`` at L1 with the comparison as a document of the run
(:mod:`kvmlab.migrate.stored`); a migration QEMU completed that left its guest failing
verification ends the command with exit status 5, after the report.

The migration engine is the ``migrate`` domain's, with the ``net`` domain's packet-path
probe, neither of which ``bench`` may import: the command line hands them in as
:data:`MIGRATE`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kvmlab.bench.registry import LabRun, LabWorkload, Provider, register
from kvmlab.errors import KvmlabError

if TYPE_CHECKING:
    from kvmlab.guest.image import GuestImage
    from kvmlab.progress import Progress
    from kvmlab.results.store import ResultStore
    from kvmlab.runtime.lab import HostAccel
    from kvmlab.runtime.machine import Backend
    from kvmlab.spec import Lab, LoadedLab

NAME = "migrations"


class Measure(Protocol):
    """``measure(store, run_id, variant, lab, host, image, progress)``: the variant's
    migrations run and stored with the run; what came out corrupted."""

    def __call__(
        self,
        store: ResultStore,
        run_id: int,
        variant: str,
        loaded: LoadedLab,
        host: HostAccel,
        image: Callable[[], GuestImage],
        progress: Progress,
        /,
    ) -> list[str]: ...


MIGRATE: Provider[Measure] = Provider("the migration engine")


class MigrationCorrupted(KvmlabError):
    """A migration QEMU completed left its guest failing verification."""

    exit_code = 5


def run(lab: LabRun) -> list[str]:
    guests = ", ".join(dict.fromkeys(m.guest for m in lab.lab.lab.migrations))
    lab.at("L1", guests, NAME)
    measure = lab.provided(MIGRATE)
    launch = lab.launch
    found = measure(
        lab.store,
        lab.run_id,
        lab.variant,
        lab.lab,
        launch.host,
        launch.image,
        launch.progress,
    )
    shown = "" if lab.variant == "default" else f"{lab.variant}: "
    return [f"{shown}{f}" for f in found]


def fault(run_id: int, found: list[str]) -> KvmlabError:
    return MigrationCorrupted(
        "migrations QEMU completed left the guest failing verification ("
        f"{'; '.join(found)}); 'kvmlab report {run_id} -o json' has "
        "every check with its evidence"
    )


def describe(lab: Lab) -> str:
    return f"the lab's {len(lab.migrations)} [[migrations]]"


def declared(lab: Lab) -> bool:
    return bool(lab.migrations)


def backend(backend: Backend, loaded: LoadedLab) -> None:
    backend.check_workloads(loaded, migrations=True)


register(
    LabWorkload(
        NAME,
        order=110,
        what="[[migrations]]",
        levels=frozenset({"L1"}),
        declared=declared,
        describe=describe,
        run=run,
        backend=backend,
        fault=fault,
    )
)
