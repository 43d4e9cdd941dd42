"""Where a workload's commands run: on the host (L0) or in a guest through its agent.

Both run an argv (never a shell string) with a timeout and return exit code and
output, and can start a background server (iperf3) that is stopped afterwards, so
a workload is written once and runs identically at every level.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from dataclasses import dataclass
from typing import Protocol

from kvmlab.errors import ProcessFailure
from kvmlab.guest.errors import AgentError
from kvmlab.runtime.machine import Machine


@dataclass(frozen=True)
class Place:
    """A level where workloads run."""

    guest: str
    """``host`` at L0, else the guest's address in the lab."""
    level: str
    accel: str
    vcpus: int
    disk: str | None
    """Block device or directory for the disk workload, None when there is none."""
    parent_addr: str | None
    """The address of the level below as this level reaches it (iperf3/ping server)."""
    tools: bool = True
    """Whether the benchmark tools are there: not in a migratable guest's self-contained
    image (busybox, the agent and kvmlab-dirty only)."""


@dataclass(frozen=True)
class Completed:
    """How a command ended."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check(self, where: str) -> Completed:
        """Raise :class:`ProcessFailure` with the output when the command failed."""
        if self.returncode != 0:
            raise ProcessFailure(
                f"{shlex.join(self.argv)} failed at {where}",
                self.argv,
                self.returncode,
                (self.stderr or self.stdout).splitlines()[-8:],
            )
        return self


class Background(Protocol):
    """A server started for the duration of one measurement."""

    def stop(self) -> None:
        """Stop it (quietly if it already ended)."""


class Executor(Protocol):
    """Runs commands at one place."""

    place: Place

    def run(self, argv: list[str], timeout: float) -> Completed:
        """Run ``argv`` to completion."""

    def start(self, argv: list[str]) -> Background:
        """Start ``argv`` in the background."""


class _HostProcess:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@dataclass
class HostExecutor:
    """Commands on the host itself (L0)."""

    place: Place

    def run(self, argv: list[str], timeout: float) -> Completed:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ProcessFailure(
                f"{shlex.join(argv)} timed out after {timeout:g} s", argv, None
            ) from exc
        except FileNotFoundError as exc:
            raise ProcessFailure(f"{argv[0]} is not installed", argv, None) from exc
        return Completed(argv, proc.returncode, proc.stdout, proc.stderr)

    def start(self, argv: list[str]) -> Background:
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        return _HostProcess(proc)


class _GuestProcess:
    def __init__(self, machine: Machine, pid: int) -> None:
        self.machine = machine
        self.pid = pid

    def stop(self) -> None:
        try:
            with self.machine.agent() as agent:
                agent.wait_ready(timeout=60)
                if agent.exec_status(self.pid) is None:
                    agent.exec(["kill", "-TERM", str(self.pid)], timeout=10)
                    agent.exec_status(self.pid)
        except AgentError:
            pass


@dataclass
class GuestExecutor:
    """Commands in a guest, through its guest agent."""

    place: Place
    machine: Machine

    def run(self, argv: list[str], timeout: float) -> Completed:
        # A step's limit is its duration plus a margin for the host; a level measured slower
        # (TCG, nested, a loaded host) gets it scaled, like every ceiling (runtime.patience).
        result = self.machine.exec(argv, timeout=timeout * self.machine.level_factor())
        return Completed(
            argv,
            result.returncode,
            result.stdout.decode(errors="replace"),
            result.stderr.decode(errors="replace"),
        )

    def start(self, argv: list[str]) -> Background:
        return _GuestProcess(self.machine, self.machine.exec_background(argv))
