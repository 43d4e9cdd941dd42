"""A guest as a QEMU process kvmlab starts itself, driven over QMP and the guest agent.

The life cycle is the contract's (:class:`kvmlab.runtime.machine.Machine`); this module
spawns QEMU (on record from the instant it exists), connects QMP, pins threads, watches the
boot, and stops QEMU: sync and quit (or ACPI power-off for a full OS), then SIGTERM/SIGKILL.
A migration's destination starts paused (:meth:`QemuMachine.launch_incoming`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Self

from kvmlab.errors import QmpFailure
from kvmlab.guest.agent import GuestAgent
from kvmlab.guest.errors import AgentError
from kvmlab.proc.processes import QEMU, alive, start_time, tail, terminate, wait_gone
from kvmlab.proc.signals import deferred_signals, unblock_in_child
from kvmlab.render.runfiles import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    QMP_SOCKET,
    RELAY_SOCKET,
    SERIAL_LOG,
)
from kvmlab.runtime.machine import (
    LaunchFailure,
    Machine,
    MachineConfig,
    MachineState,
    describe_status,
)
from kvmlab.runtime.records import GuestRecord
from kvmlab.runtime.waits import LIMITS

if TYPE_CHECKING:  # QMP (asyncio) is imported when used: exec, ps and console need none
    from kvmlab.runtime.qemu.qmp import QmpSession

QEMU_LOG = "qemu.log"


class QemuMachine(Machine):
    """A guest's QEMU process, its QMP session and its guest agent."""

    def __init__(self, config: MachineConfig) -> None:
        super().__init__(config)
        self._proc: subprocess.Popen[bytes] | None = None
        self._qmp: QmpSession | None = None
        self._marker = str(self.run_dir)
        """What the QEMU command line contains; for a guest inside a guest hypervisor,
        the hypervisor's run directory (its ``pid`` is that hypervisor's QEMU)."""

    @classmethod
    def from_record(cls, run_dir: Path, record: GuestRecord) -> Self:
        machine = cls(MachineConfig.from_record(run_dir, record))
        machine.pid = record.pid
        machine._pid_start = record.pid_start
        machine.boot = dict(record.boot)
        machine._marker = record.marker or str(run_dir)
        machine._started = record.started
        running = cls.running_on_record(record, run_dir)
        machine.state = MachineState.RUNNING if running else MachineState.STOPPED
        return machine

    # -- life cycle ---------------------------------------------------------------------

    def launch_incoming(self) -> None:
        """Start QEMU waiting for an incoming migration (its argv has ``-incoming defer``);
        return once QMP answers. The guest runs when the migration completes."""
        self.go_on_record()
        try:
            self.start()
            self.come_up(None)
        except BaseException:
            self.state = MachineState.FAILED
            self.kill()
            raise
        self.state = MachineState.PAUSED

    def start(self) -> None:
        """Spawn QEMU and put its pid on record at once."""
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

    def come_up(self, on_up: Callable[[], None] | None) -> float:
        """QMP connected, ``on_up`` run, vCPUs and the other threads pinned; the instant
        before the pinning."""
        self._qmp = self._connect_qmp(time.monotonic() + LIMITS["qmp"].value("ceiling"))
        if on_up is not None:
            on_up()
        t_up = time.monotonic()
        self._apply_pinning()
        return t_up

    def boot_serial(self) -> Path:
        """The serial log QEMU writes in the run directory."""
        return self.run_dir / SERIAL_LOG

    def stopped_while(self, when: str) -> LaunchFailure:
        status = self._proc.poll() if self._proc is not None else None
        return self.launch_failure(f"QEMU exited {when}", status)

    def launch_failure(self, what: str, returncode: int | None = None) -> LaunchFailure:
        """QEMU's command line, its exit status, its log's and the serial log's tails."""
        self.state = MachineState.FAILED
        return LaunchFailure(
            what=f"{self.config.name}: {what}",
            argv=qemu_command(self.config.argv),
            returncode=returncode,
            log_tail=[
                *(f"qemu: {line}" for line in tail(self.run_dir / QEMU_LOG, 10)),
                *(f"serial: {line}" for line in tail(self.run_dir / SERIAL_LOG, 15)),
            ],
        )

    def _new_qmp(self) -> QmpSession:
        """A session on this guest's QMP socket, not yet connected."""
        from kvmlab.runtime.qemu.qmp import QmpSession

        return QmpSession(self.run_dir / QMP_SOCKET)

    def _connect_qmp(self, deadline: float) -> QmpSession:
        session = self._new_qmp()
        try:
            return session.connect(
                timeout=max(1.0, deadline - time.monotonic()),
                give_up=lambda: not self.is_alive(),
            )
        except QmpFailure as exc:
            session.close()
            if not self.is_alive():
                raise self.stopped_while("before QMP answered") from None
            raise self.launch_failure(f"QMP did not answer: {exc}") from None
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

    def how_it_ended(self) -> str:
        status = self._proc.poll() if self._proc is not None else None
        if status is None:
            return "its QEMU has exited"
        return f"its QEMU exited, {describe_status(status)}"

    def log_tail(self) -> list[str]:
        """QEMU's log and the serial log (of the guest hypervisor for a nested guest)."""
        return [
            *(f"qemu: {line}" for line in tail(Path(self._marker) / QEMU_LOG, 6)),
            *(f"serial: {line}" for line in tail(Path(self._marker) / SERIAL_LOG, 12)),
        ]

    def polite_stop(self, timeout: float) -> None:
        """The default image: sync, then QMP quit. A full OS: the agent's guest-shutdown,
        then the ACPI power button, then quit."""
        deadline = time.monotonic() + timeout
        try:
            qmp = self._qmp or self._new_qmp().connect(timeout=3.0)
            self._qmp = qmp
        except QmpFailure:
            return  # kill() follows
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

    def release(self) -> None:
        """A stopped QEMU leaves only this object's QMP session to close."""
        self.disconnect()

    def disconnect(self) -> None:
        """Close this object's QMP session, if any (the guest is not touched)."""
        if self._qmp is not None:
            self._qmp.close()
            self._qmp = None

    def kill(self) -> None:
        """SIGTERM, then SIGKILL, to the QEMU on record (checked by its start time)."""
        self.disconnect()
        if self.pid is not None:
            terminate(self.pid, str(self.run_dir), 3.0, self._pid_start, QEMU)
        if self._proc is not None:
            self._proc.wait(10)

    def is_alive(self) -> bool:
        """Whether the QEMU process runs."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and alive(self.pid, self._marker, self._pid_start, QEMU)

    # -- using a running guest ----------------------------------------------------------

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

    def monitor(self) -> QmpSession:
        return self.qmp()

    def qmp(self) -> QmpSession:
        """The QMP session (connected on first use); also of a paused or incoming machine."""
        if self.state is MachineState.PAUSED:
            assert self._qmp is not None
            return self._qmp
        self._require(MachineState.RUNNING, "QMP")
        if self._qmp is None:
            self._qmp = self._new_qmp().connect(timeout=5.0)
        return self._qmp


def qemu_command(argv: list[str]) -> list[str]:
    """QEMU's own command line within ``argv`` (without the host-view wrapper before it)."""
    for i, arg in enumerate(argv):
        if Path(arg).name.startswith("qemu-system"):
            return argv[i:]
    return argv
