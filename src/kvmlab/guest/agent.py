"""A client for the QEMU guest agent (qemu-ga) over the unix socket of its chardev.

``qemu.qmp`` cannot be used here: the agent sends no greeting and has no capabilities
negotiation. The agent's protocol is one JSON object per line each way, plus
``guest-sync-delimited`` to get the stream in step: the client sends a 0xFF byte (which
makes the agent drop any half-read input), then a sync request with a fresh id; the
agent's answer is preceded by 0xFF, and everything before the answer carrying our id is
stale (answers to an earlier client, or to requests that reached the agent before it ran).
After any timeout the stream is out of step again, so the next call re-syncs first.

Only the agent commands the runtime needs are wrapped: guest-sync-delimited, guest-ping,
guest-exec and guest-exec-status. QEMU's own monitor (QMP) is spoken with qemu.qmp.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import json
import secrets
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from kvmlab.guest.errors import (
    AgentCommandError,
    AgentConnectError,
    AgentProtocolError,
    AgentStateError,
    AgentTimeout,
    GuestCommandFailed,
    GuestExecTimeout,
)

SENTINEL = b"\xff"
STATUS_TIMEOUT = 60.0  # the longest wait for one guest-exec-status answer
_MAX_LINE = 64 * 1024 * 1024  # qemu-ga caps captured output at 16 MiB, base64 adds a third


class AgentState(enum.Enum):
    CLOSED = "closed"  # no socket (not connected yet, or closed)
    CONNECTED = "connected"  # socket open, stream not known to be in step
    READY = "ready"  # in step: the last sync was answered and nothing is pending


@dataclass(frozen=True)
class ExecResult:
    """How a guest command ended. ``returncode`` is -N if signal N killed it."""

    returncode: int
    stdout: bytes
    stderr: bytes
    truncated: bool = False  # qemu-ga dropped output past its 16 MiB capture limit

    def check(self, argv: Sequence[str]) -> Self:
        if self.returncode != 0:
            raise GuestCommandFailed(argv, self.returncode, self.stderr)
        return self


class GuestAgent:
    """One connection to a guest agent socket; a context manager that closes it.

    ``wait_ready()`` connects and syncs, retrying until the guest's qemu-ga answers;
    every call takes a timeout and raises :class:`AgentTimeout` rather than hang.
    Not thread-safe: use one client per thread (QEMU serves one connection at a time).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self.state = AgentState.CLOSED

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._buf.clear()
        self.state = AgentState.CLOSED

    def connect(self, timeout: float = 10.0) -> None:
        """Connect to the socket, waiting for QEMU to create it."""
        if self._sock is not None:
            return
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                sock.connect(str(self.path))
            except (FileNotFoundError, ConnectionRefusedError, TimeoutError) as exc:
                sock.close()
                if time.monotonic() >= deadline:
                    raise AgentConnectError(
                        f"cannot connect to the guest agent socket {self.path} "
                        f"within {timeout:g}s: {exc}"
                    ) from exc
                time.sleep(0.05)
                continue
            except OSError as exc:
                sock.close()
                raise AgentConnectError(f"cannot connect to {self.path}: {exc}") from exc
            self._sock = sock
            self.state = AgentState.CONNECTED
            return

    def wait_ready(self, timeout: float = 60.0, attempt: float = 1.0) -> float:
        """Connect and sync until the agent answers; return the seconds it took.

        Sync requests sent before the guest's qemu-ga opened its port wait in the channel
        and are all answered later; their ids are stale and skipped.
        """
        start = time.monotonic()
        deadline = start + timeout
        self.connect(timeout)
        while True:
            left = deadline - time.monotonic()
            try:
                self.sync(min(attempt, max(left, 0.01)))
                return time.monotonic() - start
            except AgentTimeout:
                if time.monotonic() >= deadline:
                    raise AgentTimeout(
                        f"guest agent on {self.path} did not answer within {timeout:g}s "
                        "(guest still booting or init failed? see the serial console log)"
                    ) from None

    def sync(self, timeout: float = 5.0) -> None:
        """Bring the stream in step (guest-sync-delimited with a fresh id)."""
        sock = self._need_socket()
        deadline = time.monotonic() + timeout
        sync_id = secrets.randbelow(2**31)
        request = {"execute": "guest-sync-delimited", "arguments": {"id": sync_id}}
        self.state = AgentState.CONNECTED
        self._send(sock, SENTINEL + json.dumps(request).encode() + b"\n")
        while True:
            # Skip everything up to the next sentinel, then read the answer after it.
            while SENTINEL not in self._buf:
                self._buf.clear()
                self._recv(sock, deadline, "guest-sync-delimited")
            del self._buf[: self._buf.index(SENTINEL) + 1]
            try:
                answer = self._read_message(sock, deadline, "guest-sync-delimited")
            except AgentProtocolError:
                continue  # garbage between sentinels: keep looking
            if answer.get("return") == sync_id:
                self.state = AgentState.READY
                return

    def ping(self, timeout: float = 5.0) -> None:
        self.execute("guest-ping", timeout=timeout)

    def execute(
        self, command: str, arguments: Mapping[str, object] | None = None, timeout: float = 5.0
    ) -> object:
        """Run one agent command and return its ``return`` value (JSON-decoded)."""
        sock = self._need_socket()
        deadline = time.monotonic() + timeout
        if self.state is not AgentState.READY:
            self.sync(timeout)
        request: dict[str, object] = {"execute": command}
        if arguments:
            request["arguments"] = dict(arguments)
        self.state = AgentState.CONNECTED  # until the answer is read
        self._send(sock, json.dumps(request).encode() + b"\n")
        answer = self._read_message(sock, deadline, command)
        self.state = AgentState.READY
        if "error" in answer:
            err = answer["error"]
            if not isinstance(err, dict):
                raise AgentProtocolError(f"{command}: malformed error {err!r}")
            raise AgentCommandError(command, str(err.get("class")), str(err.get("desc")))
        if "return" not in answer:
            self.state = AgentState.CONNECTED
            raise AgentProtocolError(f"{command}: answer without return or error: {answer!r}")
        return answer["return"]

    def send_only(
        self, command: str, arguments: Mapping[str, object] | None = None, timeout: float = 5.0
    ) -> None:
        """Send a command the agent does not answer when it succeeds (``guest-shutdown``)."""
        sock = self._need_socket()
        if self.state is not AgentState.READY:
            self.sync(timeout)
        request: dict[str, object] = {"execute": command}
        if arguments:
            request["arguments"] = dict(arguments)
        self.state = AgentState.CONNECTED  # an error answer may still arrive
        self._send(sock, json.dumps(request).encode() + b"\n")

    def exec_start(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        capture: bool = True,
        timeout: float = 5.0,
    ) -> int:
        """Start ``argv`` in the guest (searched in PATH); return its guest pid."""
        if not argv:
            raise ValueError("empty argv")
        args: dict[str, object] = {
            "path": argv[0],
            "arg": list(argv[1:]),
            "capture-output": capture,
        }
        if input is not None:
            args["input-data"] = base64.b64encode(input).decode()
        if env is not None:
            args["env"] = [f"{k}={v}" for k, v in env.items()]
        ret = self.execute("guest-exec", args, timeout)
        if not isinstance(ret, dict) or not isinstance(ret.get("pid"), int):
            raise AgentProtocolError(f"guest-exec: unexpected answer {ret!r}")
        pid: int = ret["pid"]
        return pid

    def exec_status(self, pid: int, timeout: float = 5.0) -> ExecResult | None:
        """The result of guest-exec'd ``pid`` if it exited, else None."""
        ret = self.execute("guest-exec-status", {"pid": pid}, timeout)
        if not isinstance(ret, dict) or not isinstance(ret.get("exited"), bool):
            raise AgentProtocolError(f"guest-exec-status: unexpected answer {ret!r}")
        if not ret["exited"]:
            return None
        if isinstance(ret.get("exitcode"), int):
            code: int = ret["exitcode"]
        elif isinstance(ret.get("signal"), int):
            code = -ret["signal"]
        else:
            raise AgentProtocolError(f"guest-exec-status: exited without a code: {ret!r}")
        return ExecResult(
            returncode=code,
            stdout=_b64(ret.get("out-data")),
            stderr=_b64(ret.get("err-data")),
            truncated=bool(ret.get("out-truncated") or ret.get("err-truncated")),
        )

    def exec(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        check: bool = False,
    ) -> ExecResult:
        """Run ``argv`` in the guest and wait for it, capturing stdout and stderr.

        On timeout the command is sent SIGKILL (best effort) and GuestExecTimeout raised.
        """
        deadline = time.monotonic() + timeout
        pid = self.exec_start(argv, input=input, env=env, timeout=min(timeout, STATUS_TIMEOUT))
        delay = 0.005
        while True:
            # A guest saturated by the command itself (TCG, nested) may answer slowly or drop
            # an answer: until the command's own deadline, a late status is asked for again
            # (the next call re-syncs the stream first).
            answer_within = max(0.5, min(STATUS_TIMEOUT, deadline - time.monotonic()))
            try:
                result = self.exec_status(pid, timeout=answer_within)
            except AgentTimeout:
                if time.monotonic() >= deadline:
                    raise
                continue
            if result is not None:
                return result.check(argv) if check else result
            if time.monotonic() + delay > deadline:
                self._kill(pid)
                raise GuestExecTimeout(argv, timeout, pid)
            time.sleep(delay)
            delay = min(delay * 2, 0.5)  # long commands: fewer polls of a busy guest

    def _kill(self, pid: int) -> None:
        with contextlib.suppress(Exception):
            self.exec_start(["kill", "-KILL", str(pid)], capture=False, timeout=2.0)

    def _need_socket(self) -> socket.socket:
        if self._sock is None:
            raise AgentStateError(
                f"guest agent client for {self.path} is {self.state.value}: call connect() "
                "or wait_ready() first"
            )
        return self._sock

    def _send(self, sock: socket.socket, data: bytes) -> None:
        try:
            sock.settimeout(5.0)
            sock.sendall(data)
        except OSError as exc:
            self.close()
            raise AgentConnectError(f"guest agent socket {self.path}: send failed: {exc}") from exc

    def _recv(self, sock: socket.socket, deadline: float, what: str) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            self.state = AgentState.CONNECTED
            raise AgentTimeout(f"guest agent did not answer {what} in time")
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            self.state = AgentState.CONNECTED
            raise AgentTimeout(f"guest agent did not answer {what} in time") from None
        except OSError as exc:
            self.close()
            raise AgentConnectError(
                f"guest agent socket {self.path}: {exc} (did QEMU exit? see its log and the "
                "guest's serial console)"
            ) from exc
        if not data:
            self.close()
            raise AgentConnectError(
                f"guest agent socket {self.path} closed by QEMU (did it exit? see its log and "
                "the guest's serial console)"
            )
        self._buf += data

    def _read_message(self, sock: socket.socket, deadline: float, what: str) -> dict[str, object]:
        """The next non-empty line of the stream, as a JSON object."""
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                if len(self._buf) > _MAX_LINE:
                    self.state = AgentState.CONNECTED
                    raise AgentProtocolError(f"{what}: answer longer than {_MAX_LINE} bytes")
                self._recv(sock, deadline, what)
                continue
            line = bytes(self._buf[:end]).strip()
            del self._buf[: end + 1]
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if not isinstance(message, dict):
                self.state = AgentState.CONNECTED
                raise AgentProtocolError(f"{what}: not a JSON object: {line[:200]!r}")
            return message


def _b64(value: object) -> bytes:
    if value is None:
        return b""
    if not isinstance(value, str):
        raise AgentProtocolError(f"guest-exec-status: output is not base64 text: {value!r}")
    return base64.b64decode(value)
