"""The guest agent through libvirt (``virDomainQemuAgentCommand``), for guests a libvirtd
runs: libvirt owns the agent's socket and syncs the stream itself, locally or remotely.

Same calls as :class:`kvmlab.guest.agent.GuestAgent` (exec, timeouts, killing a command
that outlives its timeout); only the transport differs.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import libvirt
import libvirt_qemu

from kvmlab.guest.agent import AgentState, GuestAgent
from kvmlab.guest.errors import (
    AgentCommandError,
    AgentConnectError,
    AgentProtocolError,
    AgentTimeout,
    GuestInputTooLarge,
)

_NOT_READY = {
    libvirt.VIR_ERR_AGENT_UNRESPONSIVE,
    getattr(libvirt, "VIR_ERR_AGENT_COMMAND_TIMEOUT", -1),
}


MAX_INPUT = 3 * 1024 * 1024
"""libvirt's RPC carries an agent command and its answer as one string of at most 4 MiB
(``REMOTE_STRING_MAX``): input beyond this is refused before anything runs."""


class LibvirtAgent(GuestAgent):
    """The agent of one libvirt domain (``dom``: a ``virDomain``)."""

    def __init__(self, dom: Any, name: str) -> None:
        super().__init__(f"libvirt:{name}")
        self.dom = dom
        self.name = name

    def connect(self, timeout: float = 10.0) -> None:
        self.state = AgentState.CONNECTED

    def close(self) -> None:
        self.state = AgentState.CLOSED
        self._awaiting = None

    def wait_ready(self, timeout: float = 60.0, attempt: float = 1.0) -> float:
        """Ping until the guest's qemu-ga answers through libvirt; the seconds it took."""
        start = time.monotonic()
        deadline = start + timeout
        while True:
            try:
                self._command("guest-ping", None, min(max(attempt, 1.0), timeout))
                self.state = AgentState.READY
                return time.monotonic() - start
            except AgentTimeout:
                if time.monotonic() >= deadline:
                    raise AgentTimeout(
                        f"guest agent of {self.name} did not answer through libvirt within "
                        f"{timeout:g}s (guest still booting or init failed? see its serial "
                        "log in libvirt's log directory)"
                    ) from None
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))

    def sync(self, timeout: float = 5.0) -> None:
        self.state = AgentState.READY  # libvirt syncs before every command

    def execute(
        self, command: str, arguments: Mapping[str, object] | None = None, timeout: float = 5.0
    ) -> object:
        self._awaiting = command
        answer = self._command(command, arguments, timeout)
        self._awaiting = None
        return answer

    def send_only(
        self, command: str, arguments: Mapping[str, object] | None = None, timeout: float = 5.0
    ) -> None:
        with contextlib.suppress(AgentTimeout):
            self._command(command, arguments, timeout, nowait=True)

    def exec_start(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        capture: bool = True,
        timeout: float = 5.0,
    ) -> int:
        if input is not None and len(input) > MAX_INPUT:
            raise GuestInputTooLarge(len(input), MAX_INPUT)
        return super().exec_start(argv, input=input, env=env, capture=capture, timeout=timeout)

    def _pid_in_flight(self) -> int | None:
        return None  # libvirt's call returns whole or not at all: nothing is half-sent

    def _command(
        self,
        command: str,
        arguments: Mapping[str, object] | None,
        timeout: float,
        nowait: bool = False,
    ) -> object:
        request: dict[str, object] = {"execute": command}
        if arguments:
            request["arguments"] = dict(arguments)
        seconds = 0 if nowait else max(1, math.ceil(timeout))
        try:
            raw = libvirt_qemu.qemuAgentCommand(self.dom, json.dumps(request), seconds, 0)
        except libvirt.libvirtError as exc:
            code, text = exc.get_error_code(), " ".join(str(exc).split())
            if code in _NOT_READY or "not connected" in text or "not responding" in text:
                raise AgentTimeout(f"{command} through libvirt: {text}") from None
            if code == libvirt.VIR_ERR_OPERATION_INVALID:
                raise AgentConnectError(f"{self.name}: {text}") from None
            raise AgentCommandError(command, "libvirt", text) from None
        if raw is None:
            return None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise AgentProtocolError(f"{command}: not JSON: {raw[:200]!r}") from None
        if not isinstance(answer, dict) or "return" not in answer:
            raise AgentProtocolError(f"{command}: answer without return: {raw[:200]!r}")
        return answer["return"]
