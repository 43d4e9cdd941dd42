"""The guest contract every backend keeps: one running guest, whatever runs it.

A :class:`Machine` is a context manager with an explicit :class:`MachineState`. Its life
cycle is the same for every backend and is written once here:

- :meth:`Machine.launch`: on record first (so a kvmlab killed at any instant leaves a guest
  that ``ps`` and ``down`` find), then started, then up (the monitor answers), then ready
  (the guest agent answers: :meth:`Machine.wait_ready`, the one boot-wait loop, over the
  backend's hooks); any failure on the way stops what was started, and is a
  :class:`LaunchFailure`.
- :meth:`Machine.exec`, :meth:`Machine.agent`, :meth:`Machine.console_socket`,
  :meth:`Machine.relay_socket`, :meth:`Machine.monitor`: using a running guest.
- :meth:`Machine.shutdown`: graceful (:meth:`~Machine.polite_stop`), then forced
  (:meth:`~Machine.kill`); leaving the ``with`` block always shuts down and removes the
  run directory, unless :meth:`Machine.detach` handed the guest to a later command.

A backend (``runtime/qemu``: kvmlab's own QEMU process; ``runtime/libvirt``: a libvirt
domain) implements the hooks marked abstract, and a :class:`Backend` object says, before
anything starts, what it can run (its :class:`Capabilities`) and makes its machines from
the guest's spec and target (:class:`MachineConfig`). Each backend is one
:class:`BackendKind` in the registry (:mod:`kvmlab.runtime.backends`), which maps a name or
a record to it; this module imports no backend.
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
from typing import TYPE_CHECKING, ClassVar, Protocol, Self

from kvmlab.errors import ProcessFailure, RuntimeFailure, StateError, UsageError
from kvmlab.guest.agent import ExecResult, GuestAgent
from kvmlab.guest.errors import AgentError
from kvmlab.proc.confined import create_owned, remove_owned
from kvmlab.proc.processes import QEMU, alive, cpu_seconds, start_time
from kvmlab.progress import Progress
from kvmlab.runtime import boottime
from kvmlab.runtime.monitor import Monitor as Monitor
from kvmlab.runtime.records import GuestNic, GuestRecord
from kvmlab.runtime.waits import LIMITS, Stalled, Watch, cpu_steps, level_factor

if TYPE_CHECKING:
    from kvmlab.render.target import Target
    from kvmlab.spec import Guest, LoadedLab


@dataclass(frozen=True)
class Capabilities:
    """What a backend, or one guest of it, can do. Callers ask these (``if not
    backend.capabilities.migrate_lab``), never which class runs the guest; a guest kvmlab
    did not start fits the same contract with fewer of them."""

    monitor: bool = True
    """A QEMU monitor (:meth:`Machine.monitor`)."""
    agent: bool = True
    """A guest agent (:meth:`Machine.exec`)."""
    console: bool = True
    """A serial console (:meth:`Machine.console_socket`)."""
    migration: bool = True
    """``kvmlab migrate LAB/GUEST`` moves its guests (its :class:`BackendKind` names a
    migration transport)."""
    migrate_lab: bool = True
    """``kvmlab migrate LAB``, which brings the lab up again for every strategy."""
    exits_compare: bool = True
    """``kvmlab exits LAB --compare``, which brings the lab up once per variant."""
    bench_migrations: bool = True
    """A benchmark's ``[[migrations]]``."""
    exit_counters: bool = True
    """Exit profiles may read QEMU's own statistics (``query-stats``, ``query-pci``)
    through the monitor (libvirt marks a domain whose monitor another client used as
    tainted, so its guests are profiled by tracing only)."""
    refused: str = ""
    """What the backend says of what it cannot do, after the guest's name (the end of a
    refusal of its machines)."""


@dataclass
class LaunchFailure(ProcessFailure):
    """The guest did not start, died while booting, or never became ready: what went
    wrong, the command kvmlab ran (none when a daemon ran it), its exit status, the logs'
    tails, and the fix. The one failure of every backend's launch."""

    fix: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.argv:
            out = super().lines()
        else:
            out = [self.what]
            if self.returncode is not None:
                out.append(f"  exit code: {self.returncode}")
            out.extend(f"  | {line}" for line in self.log_tail)
        return [*out, *(f"  fix: {f}" for f in self.fix)]


class MachineState(enum.Enum):
    """Where a machine is in its life."""

    CREATED = "created"
    LAUNCHING = "launching"
    RUNNING = "running"
    PAUSED = "paused"
    SHUTTING_DOWN = "shutting down"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(frozen=True)
class MachineConfig:
    """What a machine runs: the guest's spec and target (what its backend renders), and how
    to reach and describe the guest."""

    lab: str
    address: tuple[str, ...]
    argv: list[str]
    """QEMU's command line when kvmlab runs QEMU (the backend renders it); the record keeps
    it. Nothing is decided from it: what later commands need is recorded as itself
    (:attr:`migratable`, :attr:`nics`)."""
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
    migratable: bool = False
    """The guest boots the self-contained image, which ``kvmlab migrate`` moves."""
    nics: tuple[GuestNic, ...] = ()
    """Its vhost-user and tap NICs (what the packet-path probe looks for)."""
    guest: Guest | None = None
    """The guest's spec, under the accelerator it runs with (None: a guest another command
    started, known by its record)."""
    target: Target | None = None
    """How the guest renders on this host (None, like :attr:`guest`)."""

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
            migratable=record.migratable,
            nics=tuple(record.nics),
        )


class Machine(abc.ABC):
    """One guest, whatever runs it: its life cycle, its agent, its console and monitor."""

    capabilities: Capabilities = Capabilities()
    """What this guest offers (a backend's class declares it; a guest kvmlab attached to
    without having started it may offer less)."""
    boot_poll_s: ClassVar[float] = 0.1
    """How often the boot-wait loop asks the agent (and polls the markers)."""
    agent_route: ClassVar[str] = ""
    """How the agent is reached, for the boot wait's words (``" through libvirt"``)."""

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

    def boot_serial(self) -> Path | None:
        """The guest's serial log as this host reads it while it boots (its output and
        init's markers are the boot's progress), or None."""
        return None

    def boot_probes(
        self, serial: Path | None, markers: boottime.MarkerWatch | None
    ) -> dict[str, Callable[[], object]]:
        """What shows the boot progressing (:class:`~kvmlab.runtime.waits.Watch`): the
        serial output, init's markers, the guest's process's CPU time."""
        probes: dict[str, Callable[[], object]] = {}
        if serial is not None and markers is not None:
            probes["serial output"] = lambda: _size(serial)
            probes["boot markers"] = lambda: len(markers.seen)
        if self.pid:
            pid = self.pid
            probes["QEMU's CPU time"] = cpu_steps(lambda: cpu_seconds(pid))
        return probes

    def launch_failure(self, what: str, returncode: int | None = None) -> LaunchFailure:
        """The failure of this guest's launch, with what the backend knows of it (its
        command, its logs, the fix)."""
        return LaunchFailure(f"{self.config.name}: {what}", [], returncode, self.log_tail())

    def stopped_while(self, when: str) -> LaunchFailure:
        """The guest stopped ``when`` (``while booting``), in the backend's words."""
        return self.launch_failure(f"the guest stopped {when}")

    def init_failed(self) -> LaunchFailure:
        """The guest's init said it failed (a boot marker)."""
        return self.launch_failure("the guest's init failed")

    def wait_ready(self, t0: float, t_up: float, ceiling: float | None) -> dict[str, float]:
        """Wait while the guest boots until its agent answers; the boot stages (s). The one
        boot-wait loop: it fails (:class:`LaunchFailure`) when the guest stops, its init
        fails, or its progress (:meth:`boot_probes`) stalls or passes the ceiling."""
        serial = self.boot_serial()
        markers = boottime.MarkerWatch(serial, t0) if serial is not None else None
        watch = Watch(
            LIMITS["boot"],
            f"{self.config.name}: its guest agent did not answer{self.agent_route}",
            self.boot_probes(serial, markers),
            start=t0,
        )
        if ceiling is not None:
            watch.ceiling = ceiling
        with self.agent() as agent:
            while True:
                if not self.is_alive():
                    raise self.stopped_while("while booting")
                if markers is not None:
                    markers.poll()
                    if markers.failed:
                        raise self.init_failed()
                try:
                    agent.wait_ready(timeout=self.boot_poll_s, attempt=self.boot_poll_s)
                    break
                except AgentError:
                    try:
                        watch.poll()
                    except Stalled as exc:
                        raise self.launch_failure(str(exc)) from None
        if markers is not None:
            markers.poll()
        seen = markers.seen if markers is not None else {}
        return boottime.stages(t0, t_up, seen, time.monotonic())

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
        """The guest's monitor (QMP); :class:`StateError` from a guest whose capabilities
        have no monitor."""

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
            migratable=cfg.migratable,
            nics=list(cfg.nics),
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
        progress.step(f"stopping {record.name}")
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
            progress.step(f"stopping the guests inside {record.name}")
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
    capabilities: ClassVar[Capabilities] = Capabilities()
    """What this backend runs (its refusals are typed: callers ask these)."""
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
        progress: Progress,
    ) -> Machine:
        """The machine for one top-level guest (``config`` carries its spec and target;
        the backend renders what it runs from them)."""

    @abc.abstractmethod
    def check(self, loaded: LoadedLab, only: str | None = None, start_inner: bool = True) -> None:
        """Refuse, before anything is created, what this backend cannot run (``start_inner``:
        a guest hypervisor's own guests start in this run)."""

    @abc.abstractmethod
    def levels(self, loaded: LoadedLab, wanted: set[str], asked: bool) -> set[str]:
        """The levels a benchmark measures on this backend, of ``wanted`` (``asked``: given
        by ``--levels``, so refused rather than left out)."""

    def check_workloads(self, loaded: LoadedLab, migrations: bool) -> None:
        """Refuse the lab's own workloads this backend does not run (its migrations, when
        :attr:`Capabilities.bench_migrations` is off)."""
        if migrations and not self.capabilities.bench_migrations:
            raise UsageError(
                f"{loaded.path}: migrations run only on the qemu backend so far; on "
                f"{self.name} leave them out with --only (e.g. --only cpu,memory,disk,"
                "net,boot)"
            )

    def refusal(self, loaded: LoadedLab, command: str) -> UsageError:
        """The error for ``kvmlab COMMAND`` (``migrate LAB``) of a lab on this backend, once
        the caller saw its capability off."""
        return UsageError(
            f"{loaded.path}: backend = \"{self.name}\": 'kvmlab {command}' runs only "
            f"on the qemu backend so far (kvmlab up/ps/exec/down run on {self.name})"
        )

    @abc.abstractmethod
    def on_this_host(self, guest: Guest) -> bool:
        """Whether a top-level guest runs on this host (its port forwards bind here)."""

    @abc.abstractmethod
    def facts(self, loaded: LoadedLab) -> dict[str, str]:
        """What a stored run records of who ran its guests."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of every connection this object opened."""


class BackendChoice(Protocol):
    """A command's backend options as given (None: not given): ``--backend``,
    ``--connect``, ``--persistent``, ``--qemu-as-root``; each backend takes the ones that
    are its own and refuses the others."""

    @property
    def backend(self) -> str | None: ...

    @property
    def connect(self) -> str | None: ...

    @property
    def persistent(self) -> bool | None: ...

    @property
    def as_root(self) -> bool | None: ...


@dataclass(frozen=True)
class ManagedVm:
    """A VM another manager runs on this host (a libvirt domain): its QEMU process (pid
    and start time), its name there and the manager's address (a libvirt URI)."""

    pid: int
    start: int
    name: str
    manager: str


@dataclass(frozen=True)
class BackendKind:
    """One backend as the registry (:mod:`kvmlab.runtime.backends`) holds it: the one
    record a backend adds besides its own package."""

    name: str
    """What records and ``--backend`` call it (a lab file's ``backend`` names the ones
    :mod:`kvmlab.spec.backend` knows)."""
    machine: Callable[[], type[Machine]]
    """The class that runs and attaches to its guests (imported on first use: a backend's
    library is needed only where one of its guests is)."""
    make: Callable[[LoadedLab, BackendChoice], Backend]
    """The backend a command runs a lab's guests on, from the lab and the options given."""
    transport: str | None = None
    """Its migration transport, ``module:Class`` (resolved by :mod:`kvmlab.migrate.
    transports`, a layer above; the class takes this backend's machines); None: its
    guests do not migrate."""
    managed: Callable[[], list[ManagedVm]] | None = None
    """The VMs this backend's managers run on this host, each proven theirs (for
    ``kvmlab ps --all``; kvmlab's own guests are known from their records); None: none."""
    guest_busy_ms: Callable[[ManagedVm], float | None] | None = None
    """Busy CPU time (ms, all its CPUs) of one of those VMs as its guest agent reports it
    through its manager (read-only); None from it: no agent answers."""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def describe_status(status: int) -> str:
    """A process's exit status in words: ``exit code 1`` or ``killed by SIGSEGV``."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit code {status}"
