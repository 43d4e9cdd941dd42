"""A stub guest: the host's ``qemu-ga`` in the guest's own directory, on the guest's agent
socket, started, watched and stopped through the guest contract's hooks only."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from kvmlab.errors import QmpFailure, StateError
from kvmlab.guest.agent import GuestAgent
from kvmlab.paths import run_root
from kvmlab.proc.processes import alive, start_time, tail, terminate
from kvmlab.proc.signals import deferred_signals, unblock_in_child
from kvmlab.render.runfiles import AGENT_SOCKET
from kvmlab.runtime import boottime
from kvmlab.runtime.machine import Capabilities, LaunchFailure, Machine, MachineConfig
from kvmlab.runtime.machine import MachineState as MachineState
from kvmlab.runtime.monitor import Monitor
from kvmlab.runtime.records import GuestRecord
from kvmlab.runtime.rundir import LabDir

ROOT = Path(__file__).resolve().parents[2]
LOG = "stub.log"
GUESTS = "stub-guests"
"""Beside the run root: each stub guest's own files (its "disk": its commands run there,
and the kvmlab inside keeps its run root there), gone with the guest."""
INNER_RUN = "run"
"""Below a guest's own directory: the run root of the kvmlab inside it."""
QGA_ALLOWED = {
    "guest-sync-delimited",
    "guest-sync",
    "guest-ping",
    "guest-info",
    "guest-exec",
    "guest-exec-status",
}
"""The agent's RPCs a stub guest answers: the rest (guest-shutdown, guest-file-*, the
suspends, guest-set-time, ...) would act on this host and are blocked."""


@functools.cache
def qemu_ga() -> str:
    """The host's qemu-ga (in sbin, which a test's PATH may leave out)."""
    found = shutil.which("qemu-ga") or shutil.which("qemu-ga", path="/usr/sbin:/sbin")
    assert found is not None, "the stub backend needs qemu-ga (deps/apt.txt: qemu-guest-agent)"
    return found


@functools.cache
def blocked_rpcs() -> str:
    """Every RPC this qemu-ga has, but the allowed ones (``-b``)."""
    listed = subprocess.run(
        [qemu_ga(), "-b", "help"], capture_output=True, text=True, timeout=30, check=False
    )
    rpcs = (listed.stdout + listed.stderr).split()
    blocked = [r for r in rpcs if r.startswith("guest-") and r not in QGA_ALLOWED]
    assert "guest-shutdown" in blocked, "qemu-ga lists no RPCs: cannot block guest-shutdown"
    return ",".join(blocked)


class StubMachine(Machine):
    """One stub guest: ``qemu-ga`` in ``<run dir>/root``, its socket the guest's agent."""

    capabilities = Capabilities(
        console=False,
        migration=False,
        exit_counters=False,
        refused="is a stub guest (a qemu-ga on this host, no VM)",
    )
    boot_poll_s = 0.02

    def __init__(
        self,
        config: MachineConfig,
        root: Path | None = None,
        fail: bool = False,
        interrupt: bool = False,
    ) -> None:
        super().__init__(config)
        self.root = root or run_root().parent / GUESTS / config.lab / "/".join(config.address)
        self.fail = fail
        self.interrupt = interrupt
        self.argv: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._monitor = StubMonitor(self)

    # -- the contract's hooks ---------------------------------------------------------------

    def start(self) -> None:
        """Spawn the guest's process in its own directory, on record at once."""
        state = self.root / ".qga"
        state.mkdir(parents=True, mode=0o700)  # a leftover of an earlier guest is an error
        if self.fail:  # a guest whose kernel panics: up, then its process ends while booting
            script = 'sleep 0.1; echo "stub: Kernel panic - not syncing: asked to" >&2; exit 3'
            self.argv = ["sh", "-c", script, "stub-guest", str(self.run_dir)]
        else:
            sock = self.run_dir / AGENT_SOCKET
            self.argv = [qemu_ga(), "-m", "unix-listen", "-p", str(sock), "-t", str(state)]
            self.argv += ["-f", str(state / "qga.pid"), "-b", blocked_rpcs()]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root)}
        log = os.open(self.run_dir / LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with deferred_signals():  # spawned and recorded, or neither
                self._proc = subprocess.Popen(
                    self.argv,
                    cwd=self.root,
                    env={**env, "LANG": "C.UTF-8"},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=unblock_in_child,  # the signals held here are not its own
                )
                self.pid = self._proc.pid
                self._pid_start = start_time(self.pid)
                self.record().save(self.run_dir)
        finally:
            os.close(log)

    def come_up(self, on_up: Callable[[], None] | None) -> float:
        """Up once its process listens on the agent's socket (as QEMU is once QMP answers;
        qemu-ga signalled before that ignores SIGTERM); Ctrl-C right then when asked."""
        deadline = time.monotonic() + 10.0
        while not self.fail and not (self.run_dir / AGENT_SOCKET).exists():
            if not self.is_alive():
                raise self.stopped_while("before it listened")
            if time.monotonic() > deadline:
                raise self.launch_failure("its agent's socket did not appear in 10 s")
            time.sleep(0.005)
        if on_up is not None:
            on_up()
        if self.interrupt:
            os.kill(os.getpid(), signal.SIGINT)  # as a user's Ctrl-C: raised from here
        return time.monotonic()

    def boot_probes(
        self, serial: Path | None, markers: boottime.MarkerWatch | None
    ) -> dict[str, Callable[[], object]]:
        log = self.run_dir / LOG
        return {"stub log": lambda: log.stat().st_size if log.exists() else 0}

    def launch_failure(self, what: str, returncode: int | None = None) -> LaunchFailure:
        return LaunchFailure(f"{self.config.name}: {what}", self.argv, returncode, self.log_tail())

    def stopped_while(self, when: str) -> LaunchFailure:
        status = self._proc.poll() if self._proc is not None else None
        return self.launch_failure(f"its stub guest exited {when}", status)

    def is_alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and alive(self.pid, str(self.run_dir), self._pid_start)

    def agent(self) -> GuestAgent:
        return StubAgent(self.run_dir / AGENT_SOCKET, self.root)

    def console_socket(self) -> socket.socket:
        raise StateError(f"{self.config.name} {self.capabilities.refused}: it has no console")

    def relay_socket(self, child: str) -> Path:
        """A guest inside reaches out through its own agent socket, under the run root of
        the kvmlab inside (no channel to bridge: it is all on this host)."""
        return (
            LabDir(self.config.lab, self.root / INNER_RUN / self.config.lab).guest_dir([child])
            / AGENT_SOCKET
        )

    def monitor(self) -> StubMonitor:
        return self._monitor

    def polite_stop(self, timeout: float) -> None:
        """A stub has nothing to flush: the kill follows."""

    def kill(self) -> None:
        if self.pid is not None:
            terminate(self.pid, str(self.run_dir), 3.0, self._pid_start)
        if self._proc is not None:
            self._proc.wait(10)
        self.release()

    def release(self) -> None:
        """A stopped stub's own files go with it."""
        if not self.is_alive():
            shutil.rmtree(self.root, ignore_errors=True)

    def disconnect(self) -> None:
        """No connection is kept."""

    def log_tail(self) -> list[str]:
        return [f"stub: {line}" for line in tail(self.run_dir / LOG, 10)]

    def extend_record(self, record: GuestRecord) -> None:
        record.backend = "stub"
        record.backend_fields = {"root": str(self.root)}

    @classmethod
    def from_record(cls, run_dir: Path, record: GuestRecord) -> Self:
        root = record.backend_fields.get("root")
        machine = cls(MachineConfig.from_record(run_dir, record), Path(root) if root else None)
        machine.pid = record.pid or None
        machine._pid_start = record.pid_start
        machine.boot = dict(record.boot)
        machine._started = record.started
        running = cls.running_on_record(record, run_dir)
        machine.state = MachineState.RUNNING if running else MachineState.STOPPED
        return machine

    @classmethod
    def running_on_record(cls, record: GuestRecord, run_dir: Path) -> bool:
        """Its process, by pid, start time and run directory (it runs no QEMU)."""
        return alive(record.pid, str(run_dir), record.pid_start) if record.pid else False


class StubAgent(GuestAgent):
    """qemu-ga's own protocol on the guest's socket; ``kvmlab`` run in the guest is this
    kvmlab with the stub registered, its run root in the guest's directory."""

    def __init__(self, path: Path, root: Path) -> None:
        super().__init__(path)
        self.root = root

    def exec_start(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        capture: bool = True,
        timeout: float = 5.0,
    ) -> int:
        if argv and argv[0] == str(Path(sys.executable).with_name("kvmlab")):
            argv = [sys.executable, "-m", "tests.fakebackend.inner", *argv[1:]]
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                **(env or {}),
                "PYTHONPATH": str(ROOT),
                "KVMLAB_RUN_DIR": str(self.root / INNER_RUN),
            }
        return super().exec_start(argv, input=input, env=env, capture=capture, timeout=timeout)


class StubMonitor(Monitor):
    """The few QMP commands kvmlab asks of a guest's monitor, answered for a stub; HMP
    port forwards kept in a table ``info usernet`` shows."""

    def __init__(self, machine: StubMachine) -> None:
        self.machine = machine
        self.forwards: dict[str, str] = {}
        """Host side (``udp:127.0.0.1:5000``) -> the whole rule."""
        self.commands: list[str] = []

    def execute(
        self, command: str, args: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        self.commands.append(command)
        m = self.machine
        if command == "query-status":
            running = m.is_alive()
            return {"status": "running" if running else "shutdown", "running": running}
        if command == "query-cpus-fast":
            return [{"cpu-index": i, "thread-id": m.pid} for i in range(m.config.vcpus)]
        if command == "query-pci":
            return []
        if command == "quit":
            m.kill()
            return {}
        if command == "human-monitor-command" and args is not None:
            return self._human(str(args["command-line"]))
        raise QmpFailure(f"QMP {command} on stub {m.config.name}: The command has not been found")

    def _human(self, line: str) -> str:
        words = line.split()
        if words[:1] == ["hostfwd_add"] and len(words) == 3:
            self.forwards[words[2].split("-", 1)[0]] = words[2]
            return ""
        if words[:1] == ["hostfwd_remove"] and len(words) == 3:
            self.forwards.pop(words[2], None)
            return ""
        if words == ["info", "usernet"]:
            rows = [
                f"  UDP[HOST_FORWARD]  12  {host.split(':')[1]}  {host.split(':')[2]}  10.0.2.15"
                for host in self.forwards
            ]
            return "\n".join(["Hub -1 (user.0):", *rows])
        return f"unknown command: '{words[0] if words else ''}'"
