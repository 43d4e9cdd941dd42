"""What the migration engine asks of a backend: one live migration job it can start,
sample, steer and end, and the guest's record moved with it.

The engine (:mod:`kvmlab.migrate.engine`) owns everything a migration means to a user:
the dirtying workload, the heartbeat watch, the decisions (postcopy after a pass, ``auto``,
the timeout), the downtime, the checks and the verdict. A transport owns only how its
backend moves the guest: kvmlab's own QEMU over QMP (:mod:`.qmp`), or libvirt's job between
two daemons (:mod:`.libvirt`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from kvmlab.errors import KvmlabError, UsageError
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.pages import Saver
from kvmlab.migrate.probe import Where
from kvmlab.migrate.result import Outcome
from kvmlab.progress import Progress
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord
from kvmlab.spec.backend import uri_option

M = TypeVar("M", bound=Machine)


@dataclass(frozen=True)
class Route:
    """Where the guest goes, as the user said it."""

    to_uri: str | None = None
    """Another libvirt daemon (``--to``): libvirt's own migration."""
    dest_qemu: str | None = None
    """kvmlab's own migration: the destination's QEMU binary (``--qemu``; the source's)."""
    channel: str = "tcp"
    """kvmlab's own migration: ``tcp`` (loopback) or ``unix`` (a socket in the run dir)."""

    def check(self) -> None:
        """Refuse a route that is wrong as written, before any guest is looked at."""
        if self.channel not in ("tcp", "unix"):
            raise UsageError("--transport must be tcp or unix")
        if self.to_uri is not None:
            uri_option(self.to_uri, "--to")


ON_THIS_HOST = Route()
"""kvmlab's own migration to a second QEMU of this host, over loopback TCP."""


@dataclass(frozen=True)
class PageSides:
    """What comparing the guest RAM of both sides needs of a transport: each side's
    ``pmemsave``, the source's memory map (``info mtree -f``), where FIFOs may be made, and
    the destination QEMU's pid (for the switch-over hook)."""

    source: Saver
    dest: Saver
    mtree: str
    scratch: Path
    dest_pid: int
    source_pid: int


class Refused(KvmlabError):
    """The backend would not do a step asked of it (e.g. libvirt refusing postcopy)."""


@dataclass
class JobState:
    """How the job ended, by the backend's account."""

    status: str
    error: str | None = None


class Transport(ABC, Generic[M]):
    """One live migration of one guest, as its backend runs it: the transport a backend's
    :class:`~kvmlab.runtime.machine.BackendKind` names, given that backend's machine of
    the guest (``M``) by the registry (:func:`kvmlab.migrate.transports.transport_for`)."""

    sample_s = 0.1
    """How often the engine samples the job (seconds)."""

    def __init__(
        self,
        source: M,
        guest_dir: Path,
        record: GuestRecord,
        settings: Settings,
        route: Route,
    ) -> None:
        self.source = source
        self.guest_dir = guest_dir
        self.record = record
        self.settings = settings
        self.route = route
        self.forwards: list[tuple[str, str]] = []
        """Host port forwards (netdev id, rule) the source holds, to add on the destination
        (through its monitor) once it runs the guest."""
        self.setup()

    @abstractmethod
    def setup(self) -> None:
        """The backend's own state for this job (nothing is touched yet)."""

    @classmethod
    @abstractmethod
    def check_route(cls, route: Route, record: GuestRecord) -> None:
        """Refuse a route this backend cannot take (:class:`UsageError`, naming the one
        it can)."""

    def copied_disks(self) -> tuple[tuple[str, int], ...]:
        """The disks this job copies to the destination (the device's target name, as
        ``vda``, and its size in bytes), in the domain's order; none when the guest has
        none or the destination shares them."""
        return ()

    def probe_route(self) -> tuple[str, str] | str:
        """Where the network probe goes: the user netdev whose forwards follow the guest,
        and the address its probe forward binds on the destination's host (this host's
        loopback when both are here); or why there is no probe."""
        if not self.forwards:
            return (
                "the guest has no user-network port forward that moves with it to the "
                "destination, so no probe reaches it from this host"
            )
        return (self.forwards[0][0], "127.0.0.1")

    def forward_from_start(self, netdev: str, rule: str) -> bool:
        """Give the destination the host forward ``rule`` on ``netdev`` from its start (it
        then answers the moment the guest runs there); False when it cannot (QEMU's own
        migration starts the destination before the probe: the forward moves afterwards)."""
        return False

    # --- before the dirtying workload starts -------------------------------------------------

    @abstractmethod
    def prepare(self, progress: Progress) -> None:
        """Every check and set-up that can refuse before the guest is touched."""

    @abstractmethod
    def describe(self) -> str:
        """The strategy as one line (the outcome's ``plan``)."""

    @property
    @abstractmethod
    def source_name(self) -> str:
        """What runs the guest now (a QEMU binary or a daemon URI)."""

    @property
    @abstractmethod
    def dest_name(self) -> str:
        """What will run it."""

    @property
    @abstractmethod
    def can_postcopy(self) -> bool:
        """Whether the job was set up so that it can switch to postcopy."""

    def downtime_target_ms(self) -> object:
        """The downtime ``auto`` aims at (for its explanation)."""
        return self.settings.downtime_limit_ms

    # --- the job ---------------------------------------------------------------------------

    @abstractmethod
    def heartbeat_files(self) -> list[Where]:
        """Where the guest's heartbeats land on each side; empty when this host cannot see
        them (a daemon on another host)."""

    @abstractmethod
    def open(self, progress: Progress) -> None:
        """The destination made ready to receive (nothing is sent yet)."""

    @abstractmethod
    def start(self, progress: Progress) -> None:
        """Start sending the guest."""

    @abstractmethod
    def sample(self) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
        """QEMU's ``query-migrate`` reply on the source and the backend's own job
        statistics, each ``None`` when it cannot be read now."""

    @abstractmethod
    def ended(self) -> JobState | None:
        """How the job ended, or ``None`` while it runs."""

    @abstractmethod
    def wait(self, seconds: float) -> list[dict[str, Any]]:
        """Wait up to ``seconds`` for the job to move on; the events seen meanwhile."""

    @abstractmethod
    def start_postcopy(self) -> None:
        """Switch the running job to postcopy (raises :class:`Refused`)."""

    @abstractmethod
    def cancel(self) -> None:
        """Cancel the running job (the source keeps the guest)."""

    @abstractmethod
    def destination_alive(self) -> bool | None:
        """Whether the destination still runs (``None``: the backend watches it itself)."""

    def unstick(self) -> str | None:
        """A job that a cancel did not end: free what holds it, if the backend knows how;
        what was done, or None."""
        return None

    # --- after the job ---------------------------------------------------------------------

    def page_sides(self) -> PageSides:
        """Both sides' guest RAM, for ``--compare-pages`` (the destination held paused);
        a transport that cannot keep both refuses (checked before anything starts)."""
        raise UsageError("--compare-pages: this backend's migration does not keep both sides")

    def resume_destination(self) -> None:
        """Let the destination, held paused for ``--compare-pages``, run the guest."""

    @abstractmethod
    def destination_running(self) -> float:
        """Wait until the destination runs the guest; the instant it was seen running."""

    def level_factor(self) -> float:
        """How much slower than the reference the destination runs (scales the wait for
        steady heartbeats)."""
        return 1.0

    @abstractmethod
    def hand_over(self) -> Machine:
        """The guest's record and address moved to the destination, the source let go:
        both or neither. The guest as it runs now."""

    def after_hand_over(self, moved: Machine, outcome: Outcome) -> None:
        """Whatever the backend reports or tidies once the guest runs on the destination."""

    @abstractmethod
    def back_out(self, outcome: Outcome, progress: Progress) -> Machine:
        """The job did not complete: the source running as before (resumed if it was
        paused), every trace of the destination gone. The source as it runs now."""

    @abstractmethod
    def destination_evidence(self) -> str:
        """What the destination left to explain its failure (its serial log's tail)."""

    def abandon(self) -> None:
        """Postcopy failed and the guest is lost: keep the evidence, stop the destination,
        leave the paused source to ``kvmlab down``."""

    @abstractmethod
    def discard(self) -> None:
        """Something unexpected ended the attempt: stop whatever of the job still runs that
        is not the guest (best effort)."""

    def close(self) -> None:
        """Every connection and lock of the job released (always called)."""


AnyTransport = Transport[Any]
"""A transport of any backend, as the engine holds it (it asks only this contract)."""
