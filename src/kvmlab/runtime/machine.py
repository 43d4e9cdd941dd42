"""The guest contract every backend keeps: one running guest, whatever runs it.

A :class:`Machine` is a context manager with an explicit :class:`MachineState`. Its life
cycle is the same for every backend and is written once here:

- :meth:`Machine.launch`: on record first (so a kvmlab killed at any instant leaves a guest
  that ``ps`` and ``down`` find), then started, then up (the monitor answers), then ready
  (the guest agent answers); any failure on the way stops what was started.
- :meth:`Machine.exec`, :meth:`Machine.agent`, :meth:`Machine.console_socket`,
  :meth:`Machine.relay_socket`, :meth:`Machine.monitor`: using a running guest.
- :meth:`Machine.shutdown`: graceful (:meth:`~Machine.polite_stop`), then forced
  (:meth:`~Machine.kill`); leaving the ``with`` block always shuts down and removes the
  run directory, unless :meth:`Machine.detach` handed the guest to a later command.

A backend (``runtime/qemu``: kvmlab's own QEMU process; ``runtime/libvirt``: a libvirt
domain) implements the hooks marked abstract, and a :class:`Backend` object says, before
anything starts, what it can run and makes its machines. :mod:`kvmlab.runtime.backends`
maps a name or a record to them; this module imports no backend.
"""

from __future__ import annotations

import abc
import enum
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from kvmlab.errors import ProcessFailure, RuntimeFailure, StateError
from kvmlab.guest.agent import ExecResult, GuestAgent
from kvmlab.guest.errors import AgentError
from kvmlab.proc.confined import create_owned, remove_owned
from kvmlab.proc.processes import QEMU, alive, start_time
from kvmlab.runtime.rundir import GuestRecord
from kvmlab.runtime.waits import LIMITS, level_factor

if TYPE_CHECKING:
    from kvmlab.render.target import Target
    from kvmlab.spec import Guest, LoadedLab

Progress = Callable[[str], None]


class MachineState(enum.Enum):
    """Where a machine is in its life."""

    CREATED = "created"
    LAUNCHING = "launching"
    RUNNING = "running"
    PAUSED = "paused"
    SHUTTING_DOWN = "shutting down"
    STOPPED = "stopped"
    FAILED = "failed"


class LaunchFailure(ProcessFailure):
    """The guest did not start, died while booting, or never became ready."""


class Monitor(Protocol):
    """A QMP-like monitor: run a command, get its ``return`` value."""

    def execute(
        self, command: str, args: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any: ...


@dataclass(frozen=True)
class MachineConfig:
    """What a machine runs: the rendered argv and how to reach and describe the guest."""

    lab: str
    address: tuple[str, ...]
    argv: list[str]
    run_dir: Path
    accel: str
    accel_reason: str
    vcpus: int
    memory: int
    boots_image: bool = True
    pinning: dict[int, tuple[int, ...]] = field(default_factory=dict)
    emulator_pinning: tuple[int, ...] | None = None
    children: bool = False
    """The guest is a guest hypervisor running guests of the lab (stopped before it)."""
    under_kvm: dict[str, str] = field(default_factory=dict)
    """The KVM the guest runs under, as its hypervisor's ``/sys/module`` shows it
    (``{"kvm_amd.npt": "0", ...}``); empty under TCG or where it cannot be read."""

    @property
    def name(self) -> str:
        """``lab/guest`` as users type it."""
        return "/".join((self.lab, *self.address))

    @classmethod
    def from_record(cls, run_dir: Path, record: GuestRecord) -> MachineConfig:
        """The configuration of a guest another kvmlab command started."""
        return cls(
            lab=record.lab,
            address=tuple(record.address),
            argv=record.argv,
            run_dir=run_dir,
            accel=record.accel,
            accel_reason=record.accel_reason,
            vcpus=record.vcpus,
            memory=record.memory,
            boots_image=record.boots_image,
            children=record.children,
            under_kvm=dict(record.under_kvm),
        )


class Machine(abc.ABC):
    """One guest, whatever runs it: its life cycle, its agent, its console and monitor."""

    def __init__(self, config: MachineConfig) -> None:
        self.config = config
        self.run_dir = config.run_dir
        self.state = MachineState.CREATED
        self.pid: int | None = None
        """The process running the guest (QEMU, or the guest hypervisor's QEMU)."""
        self.boot: dict[str, float] = {}
        self._detached = False
        self._started = 0.0
        self._pid_start: int | None = None

    # -- what a backend implements ------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def from_record(cls, run_dir: Path, record: GuestRecord) -> Self:
        """A machine for a guest another kvmlab command started (for exec, down)."""

    @classmethod
    def running_on_record(cls, record: GuestRecord, run_dir: Path) -> bool:
        """Whether the guest of ``record`` still runs: its process, named by pid, start time,
        the QEMU it runs and what that QEMU's command line contains (default: its run
        directory)."""
        return alive(record.pid, record.marker or str(run_dir), record.pid_start, QEMU)

    @classmethod
    def process_here(cls, record: GuestRecord) -> bool:
        """Whether the guest's process is on this host (looked at by its pid)."""
        return True

    daemon_owns_process: ClassVar[bool] = False
    """Whether a daemon owns the guest's process (kvmlab stops it through the daemon and
    never signals it itself)."""

    @classmethod  # noqa: B027 (a hook: kvmlab's own QEMU has nothing to reach)
    def check_reachable(cls, record: GuestRecord) -> None:
        """Fail, before anything is stopped, when what runs the guest cannot be reached."""

    @abc.abstractmethod
    def start(self) -> None:
        """Start the guest (the run directory exists and it is on record)."""

    @abc.abstractmethod
    def come_up(self, on_up: Callable[[], None] | None) -> float:
        """Once started: wait until the backend holds the guest (QEMU's monitor answers),
        run ``on_up`` (e.g. taps moved), apply pinning; the instant QEMU was up (where the
        ``qemu`` boot stage ends)."""

    @abc.abstractmethod
    def wait_ready(self, t0: float, t_up: float, ceiling: float | None) -> dict[str, float]:
        """Wait while the guest boots until its agent answers; the boot stages (s)."""

    @abc.abstractmethod
    def is_alive(self) -> bool:
        """Whether the guest runs."""

    @abc.abstractmethod
    def agent(self) -> GuestAgent:
        """A client of the guest's agent."""

    @abc.abstractmethod
    def console_socket(self) -> socket.socket:
        """The serial console, connected."""

    @abc.abstractmethod
    def relay_socket(self, child: str) -> Path:
        """The host end of the channel bridged to ``child``'s agent inside this guest."""

    @abc.abstractmethod
    def monitor(self) -> Monitor:
        """The guest's monitor (QMP); :class:`StateError` from a backend that lends none."""

    @abc.abstractmethod
    def polite_stop(self, timeout: float) -> None:
        """Ask the guest to stop (sync, power off) within ``timeout``; may leave it running."""

    @abc.abstractmethod
    def kill(self) -> None:
        """Stop the guest for good and let go of everything the backend holds for it."""

    @abc.abstractmethod
    def release(self) -> None:
        """Let go of a guest that is already stopped (its definition, its connections)."""

    @abc.abstractmethod
    def disconnect(self) -> None:
        """Close this object's connections to the backend (the guest is not touched)."""

    @abc.abstractmethod
    def log_tail(self) -> list[str]:
        """The last lines of the guest's logs, each prefixed with its source."""

    def extend_record(self, record: GuestRecord) -> None:  # noqa: B027 (a hook; QEMU adds none)
        """Add the backend's own fields to the record about to be saved."""

    # -- life cycle ---------------------------------------------------------------------

    def launch(
        self, ceiling: float | None = None, on_up: Callable[[], None] | None = None
    ) -> dict[str, float]:
        """Start the guest and wait until its agent answers; return the boot stages (s).

        ``on_up`` runs as soon as the backend holds the guest (QEMU has made its devices,
        e.g. taps). On any failure the guest is stopped and the error raised.
        """
        t0 = self.go_on_record()
        try:
            self.start()
            t_up = self.come_up(on_up)
            self.boot = self.wait_ready(t0, t_up, ceiling)
        except BaseException:
            self.state = MachineState.FAILED
            self.kill()
            raise
        self.state = MachineState.RUNNING
        self.record().save(self.run_dir)
        return self.boot

    def go_on_record(self) -> float:
        """Launching: the run directory created, the guest on record before any process
        exists; the start instant."""
        self._require(MachineState.CREATED, "launch")
        self.state = MachineState.LAUNCHING
        create_owned(self.run_dir, f"guest {self.config.name}")
        t0 = time.monotonic()
        self._started = time.time()
        self.record().save(self.run_dir)
        return t0

    def detach(self) -> None:
        """Leave the guest running when this object goes away (``kvmlab up``)."""
        self._require(MachineState.RUNNING, "detach")
        self.disconnect()
        self._detached = True

    def shutdown(self, timeout: float = 20.0, force: bool = False) -> None:
        """Stop the guest: graceful first (unless ``force``), then forced."""
        if self.state in (MachineState.STOPPED, MachineState.CREATED):
            self.release()
            self.remove_run_dir()
            return
        self.state = MachineState.SHUTTING_DOWN
        try:
            if not force and self.is_alive():
                self.polite_stop(timeout)
        finally:
            self.kill()
        self.state = MachineState.STOPPED

    def remove_run_dir(self) -> None:
        """Remove the guest's run directory (only kvmlab's own, see kvmlab.proc.confined)."""
        if not self.is_alive():
            remove_owned(self.run_dir)

    def resumed(self) -> None:
        """The incoming machine's guest runs now (its migration completed)."""
        self._require(MachineState.PAUSED, "resume")
        self.state = MachineState.RUNNING

    @property
    def pid_start(self) -> int | None:
        """The process's start time (``/proc/PID/stat``): with the pid, it names it for good."""
        return self._pid_start

    @property
    def detached(self) -> bool:
        """Whether :meth:`detach` handed the guest over to a later command."""
        return self._detached

    # -- using a running guest ----------------------------------------------------------

    def exec(
        self,
        argv: list[str],
        timeout: float = 600.0,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
        patience: float | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the guest through the agent (never a shell unless argv is one);
        ``patience``: how long the agent may take to answer at all (default: by level)."""
        self._require(MachineState.RUNNING, "exec")
        if not self.is_alive():
            self.state = MachineState.STOPPED
            raise StateError(f"{self.config.name} is not running ({self.how_it_ended()})")
        try:
            with self.agent() as agent:
                agent.wait_ready(timeout=patience or self.agent_patience())
                return agent.exec(argv, timeout=timeout, input=input, env=env)
        except AgentError as exc:
            if self.is_alive():
                raise
            self.state = MachineState.STOPPED
            raise self.died(f"{self.config.name} died while running {argv[0]}") from exc

    def exec_background(self, argv: list[str]) -> int:
        """Start ``argv`` in the guest without waiting (it ends with the guest); its guest pid."""
        self._require(MachineState.RUNNING, "exec")
        with self.agent() as agent:
            agent.wait_ready(timeout=self.agent_patience())
            return agent.exec_start(argv, capture=False)

    def level_factor(self) -> float:
        """How much slower than the reference this guest is (from its measured boot)."""
        return level_factor(self.boot)

    def agent_patience(self) -> float:
        """How long its agent may take to answer: a TCG guest hypervisor busy with its own
        guest's I/O answers for that guest (through the relay) in tens of seconds."""
        return LIMITS["agent"].value("ceiling", self.level_factor())

    def died(self, what: str) -> RuntimeFailure:
        """The error for a guest that stopped under us, with its logs' tails."""
        return RuntimeFailure("\n".join([f"{what}: {self.how_it_ended()}", *self.log_tail()]))

    def how_it_ended(self) -> str:
        """What is known of how the guest stopped (a backend may know its exit status)."""
        return "it has stopped"

    def record(self) -> GuestRecord:
        """The persistent description of this guest (``launching`` until it runs)."""
        cfg = self.config
        launching = self.state is not MachineState.RUNNING
        record = GuestRecord(
            lab=cfg.lab,
            address=list(cfg.address),
            pid=self.pid or 0,
            argv=cfg.argv,
            accel=cfg.accel,
            accel_reason=cfg.accel_reason,
            vcpus=cfg.vcpus,
            memory=cfg.memory,
            started=self._started,
            boots_image=cfg.boots_image,
            children=cfg.children,
            under_kvm=dict(cfg.under_kvm),
            boot=self.boot,
            pid_start=self._pid_start,
            state="launching" if launching else "running",
            owner=os.getpid() if launching else None,
            owner_start=start_time(os.getpid()) if launching else None,
        )
        self.extend_record(record)
        return record

    def stop_as_recorded(
        self,
        record: GuestRecord,
        force: bool,
        progress: Progress,
        stop_children: Callable[[Machine, str], None],
    ) -> bool:
        """``kvmlab down`` of this guest as on record: its own guests first (unless
        ``force``), then it; True if it ran."""
        if not self.is_alive():
            return False
        self._stop_inside(record, force, progress, stop_children)
        progress(f"stopping {record.name}")
        self.shutdown(force=force or record.state != "running")
        return True

    def _stop_inside(
        self,
        record: GuestRecord,
        force: bool,
        progress: Progress,
        stop_children: Callable[[Machine, str], None],
    ) -> None:
        if record.children and record.state == "running" and not force:
            progress(f"stopping the guests inside {record.name}")
            stop_children(self, record.lab)

    def _require(self, state: MachineState, action: str) -> None:
        if self.state is not state:
            raise StateError(
                f"cannot {action} {self.config.name}: it is {self.state.value}, not {state.value}"
            )

    # -- context manager ----------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._detached:
            return
        try:
            self.shutdown(force=kind is not None)
        finally:
            self.remove_run_dir()


class Backend(abc.ABC):
    """Who runs a lab's guests (kvmlab's own QEMU, or a libvirtd): asked before anything
    starts what it can run, then asked for each guest's :class:`Machine`."""

    name: ClassVar[str]
    makes_guest_sockets: ClassVar[bool] = True
    """Whether kvmlab makes the guests' unix sockets in its run directory (a libvirtd makes
    its own), so their paths are checked before anything starts."""

    @abc.abstractmethod
    def machine(
        self,
        loaded: LoadedLab,
        path: tuple[str, ...],
        guest: Guest,
        config: MachineConfig,
        target: Callable[[], Target],
        progress: Progress,
    ) -> Machine:
        """The machine for one top-level guest (``target``: how it renders here)."""

    @abc.abstractmethod
    def check(self, loaded: LoadedLab, only: str | None = None, start_inner: bool = True) -> None:
        """Refuse, before anything is created, what this backend cannot run (``start_inner``:
        a guest hypervisor's own guests start in this run)."""

    @abc.abstractmethod
    def levels(self, loaded: LoadedLab, wanted: set[str], asked: bool) -> set[str]:
        """The levels a benchmark measures on this backend, of ``wanted`` (``asked``: given
        by ``--levels``, so refused rather than left out)."""

    @abc.abstractmethod
    def check_workloads(self, loaded: LoadedLab, migrations: bool) -> None:
        """Refuse the lab's own workloads this backend does not run (by name)."""

    @abc.abstractmethod
    def check_command(self, loaded: LoadedLab, command: str) -> None:
        """Refuse a command (``kvmlab migrate --lab``, ...) this backend does not run a
        lab's guests for."""

    @abc.abstractmethod
    def on_this_host(self, guest: Guest) -> bool:
        """Whether a top-level guest runs on this host (its port forwards bind here)."""

    @abc.abstractmethod
    def facts(self, loaded: LoadedLab) -> dict[str, str]:
        """What a stored run records of who ran its guests."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of every connection this object opened."""


def describe_status(status: int) -> str:
    """A process's exit status in words: ``exit code 1`` or ``killed by SIGSEGV``."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit code {status}"
