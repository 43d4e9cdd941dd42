"""One running guest: a QEMU process driven over QMP and the guest agent.

A :class:`Machine` is a context manager with an explicit :class:`MachineState`.
Leaving the ``with`` block always stops QEMU (politely, then by force) and removes
the run directory, unless :meth:`Machine.detach` handed the guest over to a later
command (``kvmlab up`` does that; ``kvmlab down`` attaches again).
"""

from __future__ import annotations

import contextlib
import enum
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import NoReturn, Self

from kvmlab.errors import ProcessFailure, QmpFailure, RuntimeFailure, StateError
from kvmlab.guest.agent import ExecResult, GuestAgent
from kvmlab.guest.errors import AgentError
from kvmlab.proc.confined import create_owned, remove_owned
from kvmlab.proc.processes import alive, cpu_seconds, start_time, tail, terminate, wait_gone
from kvmlab.proc.signals import deferred_signals, unblock_in_child
from kvmlab.render.devices.control import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    QMP_SOCKET,
    RELAY_SOCKET,
    SERIAL_LOG,
)
from kvmlab.runtime import boottime
from kvmlab.runtime.qemu.qmp import QmpSession
from kvmlab.runtime.rundir import GuestRecord
from kvmlab.runtime.waits import LIMITS, Stalled, Watch, cpu_steps, level_factor

QEMU_LOG = "qemu.log"


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
    """QEMU did not start, died while booting, or the guest never became ready."""


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

    @property
    def name(self) -> str:
        """``lab/guest`` as users type it."""
        return "/".join((self.lab, *self.address))


class Machine:
    """A guest's QEMU process, its QMP session and its guest agent."""

    def __init__(self, config: MachineConfig) -> None:
        self.config = config
        self.run_dir = config.run_dir
        self.state = MachineState.CREATED
        self.pid: int | None = None
        self.boot: dict[str, float] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._qmp: QmpSession | None = None
        self._detached = False
        self._started = 0.0
        self._pid_start: int | None = None
        self._marker = str(self.run_dir)
        """What the QEMU command line contains; for a guest inside a guest hypervisor,
        the hypervisor's run directory (its ``pid`` is that hypervisor's QEMU)."""

    # -- life cycle ---------------------------------------------------------------------

    def launch(
        self, ceiling: float | None = None, on_qmp: Callable[[], None] | None = None
    ) -> dict[str, float]:
        """Start QEMU and wait until the guest agent answers; return the boot stages (s).

        The guest is on record before QEMU is spawned and gets its pid at once after, so
        a kvmlab killed at any instant leaves a QEMU that ``ps`` and ``down`` find.
        ``on_qmp`` runs as soon as QMP answers (QEMU has made its devices, e.g. taps).
        """
        t0 = self._spawn()
        try:
            t_up = self._come_up(t0, on_qmp)
            self.boot = self._wait_for_agent(t0, t_up, ceiling)
        except BaseException:
            self.state = MachineState.FAILED
            self._kill()
            raise
        self.state = MachineState.RUNNING
        self.record().save(self.run_dir)
        return self.boot

    def launch_incoming(self) -> None:
        """Start QEMU waiting for an incoming migration (its argv has ``-incoming defer``);
        return once QMP answers. The guest runs when the migration completes."""
        t0 = self._spawn()
        try:
            self._qmp = self._connect_qmp(t0 + LIMITS["qmp"].value("ceiling"))
            self._apply_pinning()
        except BaseException:
            self.state = MachineState.FAILED
            self._kill()
            raise
        self.state = MachineState.PAUSED

    def _come_up(self, t0: float, on_qmp: Callable[[], None] | None) -> float:
        """Once spawned: QMP connected, ``on_qmp`` run, vCPUs pinned; the instant QEMU was
        up (the ``qemu`` boot stage ends there)."""
        self._qmp = self._connect_qmp(t0 + LIMITS["qmp"].value("ceiling"))
        if on_qmp is not None:
            on_qmp()
        t_qmp = time.monotonic()
        self._apply_pinning()
        return t_qmp

    def _on_record(self) -> float:
        """Launching: the run directory created, the guest on record before any process
        exists; the start instant."""
        self._require(MachineState.CREATED, "launch")
        self.state = MachineState.LAUNCHING
        create_owned(self.run_dir, f"guest {self.config.name}")
        t0 = time.monotonic()
        self._started = time.time()
        self.record().save(self.run_dir)
        return t0

    def _spawn(self) -> float:
        """Create the run directory, spawn QEMU and put it on record; the start instant."""
        t0 = self._on_record()
        log_fd = os.open(
            self.run_dir / QEMU_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600
        )
        try:
            with deferred_signals():  # spawned and recorded, or neither
                self._proc = subprocess.Popen(
                    self.config.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log_fd,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches kvmlab, which stops QEMU in order
                    umask=0o177,  # sockets and logs 0600
                    preexec_fn=unblock_in_child,
                )
                self.pid = self._proc.pid
                self._pid_start = start_time(self.pid)
                self.record().save(self.run_dir)
        finally:
            os.close(log_fd)
        return t0

    def _wait_for_agent(self, t0: float, t_qmp: float, ceiling: float | None) -> dict[str, float]:
        """Wait while the guest boots (serial output, markers, QEMU's CPU time advancing)
        until its agent answers; fail on a stall, a ceiling, init's failure or QEMU's exit."""
        markers = boottime.MarkerWatch(self.run_dir / SERIAL_LOG, t0)
        serial = self.run_dir / SERIAL_LOG
        pid = self.pid or 0
        watch = Watch(
            LIMITS["boot"],
            f"{self.config.name}: its guest agent did not answer",
            {
                "serial output": lambda: serial.stat().st_size if serial.exists() else 0,
                "boot markers": lambda: len(markers.seen),
                "QEMU's CPU time": cpu_steps(lambda: cpu_seconds(pid)),
            },
            start=t0,
        )
        if ceiling is not None:
            watch.ceiling = ceiling
        with GuestAgent(self.run_dir / AGENT_SOCKET) as agent:
            while True:
                self._check_alive("while booting")
                markers.poll()
                if markers.failed:
                    self._fail("the guest's init failed", None)
                try:
                    agent.wait_ready(timeout=0.1, attempt=0.1)  # markers polled at 0.1 s
                    break
                except AgentError:
                    try:
                        watch.poll()
                    except Stalled as exc:
                        self._fail(str(exc), None)
        markers.poll()
        return boottime.stages(t0, t_qmp, markers.seen, time.monotonic())

    def _connect_qmp(self, deadline: float) -> QmpSession:
        session = QmpSession(self.run_dir / QMP_SOCKET)
        try:
            return session.connect(
                timeout=max(1.0, deadline - time.monotonic()),
                give_up=lambda: not self.is_alive(),
            )
        except QmpFailure as exc:
            session.close()
            self._check_alive("before QMP answered")
            self._fail(f"QMP did not answer: {exc}", None)
        except BaseException:  # Ctrl-C while connecting: no task left for the GC to find
            session.close()
            raise

    def _apply_pinning(self) -> None:
        """Pin vCPU threads (from query-cpus-fast) and the other QEMU threads, as specified."""
        cfg = self.config
        if not cfg.pinning and cfg.emulator_pinning is None:
            return
        assert self._qmp is not None and self.pid is not None
        cpus = self._qmp.execute("query-cpus-fast")
        vcpu_threads = {c["cpu-index"]: c["thread-id"] for c in cpus}
        for index, host_cpus in cfg.pinning.items():
            os.sched_setaffinity(vcpu_threads[index], host_cpus)
        if cfg.emulator_pinning is not None:
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                if int(task.name) not in vcpu_threads.values():
                    os.sched_setaffinity(int(task.name), cfg.emulator_pinning)

    def _check_alive(self, when: str) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._fail(f"QEMU exited {when}", self._proc.returncode)

    def _fail(self, what: str, returncode: int | None) -> NoReturn:
        self.state = MachineState.FAILED
        raise LaunchFailure(
            what=f"{self.config.name}: {what}",
            argv=qemu_command(self.config.argv),
            returncode=returncode,
            log_tail=[
                *(f"qemu: {line}" for line in tail(self.run_dir / QEMU_LOG, 10)),
                *(f"serial: {line}" for line in tail(self.run_dir / SERIAL_LOG, 15)),
            ],
        )

    def _died(self, what: str) -> RuntimeFailure:
        """The error for a guest whose QEMU exited under us, with its serial log's tail."""
        status = self._proc.poll() if self._proc is not None else None
        how = (
            f"its QEMU exited ({describe_status(status)})"
            if status is not None
            else ("its QEMU exited")
        )
        logs = [
            *(f"qemu: {line}" for line in tail(Path(self._marker) / QEMU_LOG, 6)),
            *(f"serial: {line}" for line in tail(Path(self._marker) / SERIAL_LOG, 12)),
        ]
        return RuntimeFailure("\n".join([f"{what}: {how}", *logs]))

    @classmethod
    def attach(cls, run_dir: Path, record: GuestRecord) -> Machine:
        """A machine for a guest another kvmlab command started (for exec, down)."""
        if record.backend == "libvirt":
            from kvmlab.runtime.libvirt.machine import LibvirtMachine

            return LibvirtMachine.attach_libvirt(run_dir, record)
        config = MachineConfig(
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
        )
        machine = cls(config)
        machine.pid = record.pid
        machine._pid_start = record.pid_start
        machine.boot = dict(record.boot)
        machine._marker = record.marker or str(run_dir)
        machine._started = record.started
        machine.state = MachineState.RUNNING if record.running(run_dir) else MachineState.STOPPED
        return machine

    def detach(self) -> None:
        """Leave the guest running when this object goes away (``kvmlab up``)."""
        self._require(MachineState.RUNNING, "detach")
        self._close_qmp()
        self._detached = True

    def shutdown(self, timeout: float = 20.0, force: bool = False) -> None:
        """Stop the guest: sync its disks and quit (or ACPI power-off), then force."""
        if self.state in (MachineState.STOPPED, MachineState.CREATED):
            self._release()
            self._cleanup()
            return
        self.state = MachineState.SHUTTING_DOWN
        try:
            if not force and self.is_alive():
                self._polite_stop(timeout)
        finally:
            self._kill()
        self.state = MachineState.STOPPED

    def _polite_stop(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        try:
            qmp = self._qmp or QmpSession(self.run_dir / QMP_SOCKET).connect(timeout=3.0)
            self._qmp = qmp
        except QmpFailure:
            return  # _kill() follows
        if self.config.boots_image:
            # The default image has no init system to power it off: flush the guest's
            # dirty pages to its disks (its own writes live in a tmpfs), then quit.
            try:
                with GuestAgent(self.run_dir / AGENT_SOCKET) as agent:
                    agent.wait_ready(timeout=min(5.0, timeout))
                    agent.exec(["sync"], timeout=min(10.0, timeout))
            except AgentError:
                pass
        else:
            # A full OS: the agent's guest-shutdown (systemd), then the ACPI power button.
            with contextlib.suppress(AgentError), GuestAgent(self.run_dir / AGENT_SOCKET) as a:
                a.wait_ready(timeout=min(5.0, timeout))
                a.send_only("guest-shutdown", {"mode": "powerdown"})
            if qmp.wait_event(["SHUTDOWN"], min(10.0, timeout / 2)) is None:
                with contextlib.suppress(QmpFailure):
                    qmp.execute("system_powerdown")
                    qmp.wait_event(["SHUTDOWN"], max(0.0, deadline - time.monotonic()))
        try:
            if self.is_alive():
                qmp.execute("quit", timeout=5.0)
        except QmpFailure:
            pass
        assert self.pid is not None
        wait_gone(self.pid, max(0.5, deadline - time.monotonic()), str(self.run_dir))

    def _release(self) -> None:
        """Let go of a stopped guest (its QMP session; a libvirt domain's definition)."""
        self._close_qmp()

    def disconnect(self) -> None:
        """Close this object's QMP session, if any (the guest is not touched)."""
        self._close_qmp()

    def _close_qmp(self) -> None:
        if self._qmp is not None:
            self._qmp.close()
            self._qmp = None

    def _kill(self) -> None:
        self._close_qmp()
        if self.pid is not None:
            terminate(self.pid, str(self.run_dir), grace=3.0, started=self._pid_start)
        if self._proc is not None:
            self._proc.wait(10)

    def _cleanup(self) -> None:
        """Remove the guest's run directory (only kvmlab's own, see kvmlab.proc.confined)."""
        if not self.is_alive():
            remove_owned(self.run_dir)

    @property
    def pid_start(self) -> int | None:
        """QEMU's start time (``/proc/PID/stat``), with the pid naming the process for good."""
        return self._pid_start

    def resumed(self) -> None:
        """The incoming machine's guest runs now (its migration completed)."""
        self._require(MachineState.PAUSED, "resume")
        self.state = MachineState.RUNNING

    @property
    def detached(self) -> bool:
        """Whether :meth:`detach` handed the guest over to a later command."""
        return self._detached

    def is_alive(self) -> bool:
        """Whether the QEMU process runs."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and alive(self.pid, self._marker, self._pid_start)

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
            raise StateError(f"{self.config.name} is not running (its QEMU has exited)")
        try:
            with self.agent() as agent:
                agent.wait_ready(timeout=patience or self.agent_patience())
                return agent.exec(argv, timeout=timeout, input=input, env=env)
        except AgentError as exc:
            if self.is_alive():
                raise
            self.state = MachineState.STOPPED
            raise self._died(f"{self.config.name} died while running {argv[0]}") from exc

    def level_factor(self) -> float:
        """How much slower than the reference this guest is (from its measured boot)."""
        return level_factor(self.boot)

    def agent_patience(self) -> float:
        """How long its agent may take to answer: a TCG guest hypervisor busy with its own
        guest's I/O answers for that guest (through the relay) in tens of seconds."""
        return LIMITS["agent"].value("ceiling", self.level_factor())

    def exec_background(self, argv: list[str]) -> int:
        """Start ``argv`` in the guest without waiting (it ends with the guest); its guest pid."""
        self._require(MachineState.RUNNING, "exec")
        with self.agent() as agent:
            agent.wait_ready(timeout=self.agent_patience())
            return agent.exec_start(argv, capture=False)

    def agent(self) -> GuestAgent:
        """A client of the guest's agent (its socket in the run directory)."""
        return GuestAgent(self.run_dir / AGENT_SOCKET)

    def console_socket(self) -> socket.socket:
        """The serial console, connected (QEMU's console socket in the run directory)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.run_dir / CONSOLE_SOCKET))
        except OSError:
            sock.close()
            raise
        return sock

    def relay_socket(self, child: str) -> Path:
        """The host end of the channel bridged to ``child``'s agent inside this guest."""
        return self.run_dir / RELAY_SOCKET.format(child)

    def qmp(self) -> QmpSession:
        """The QMP session (connected on first use); also of a paused or incoming machine."""
        if self.state is MachineState.PAUSED:
            assert self._qmp is not None
            return self._qmp
        self._require(MachineState.RUNNING, "QMP")
        if self._qmp is None:
            self._qmp = QmpSession(self.run_dir / QMP_SOCKET).connect(timeout=5.0)
        return self._qmp

    def record(self) -> GuestRecord:
        """The persistent description of this guest (``launching`` until it runs)."""
        cfg = self.config
        launching = self.state is not MachineState.RUNNING
        return GuestRecord(
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
            boot=self.boot,
            pid_start=self._pid_start,
            state="launching" if launching else "running",
            owner=os.getpid() if launching else None,
            owner_start=start_time(os.getpid()) if launching else None,
        )

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
            self._cleanup()


def describe_status(status: int) -> str:
    """A process's exit status in words: ``exit code 1`` or ``killed by SIGSEGV``."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit code {status}"


def qemu_command(argv: list[str]) -> list[str]:
    """QEMU's own command line within ``argv`` (without the host-view wrapper before it)."""
    for i, arg in enumerate(argv):
        if Path(arg).name.startswith("qemu-system"):
            return argv[i:]
    return argv
