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

guest-exec takes a command's whole input at once (base64 in the request, which QEMU's JSON
parser caps at 64 MiB) and hands back its output only after it exited, at most 16 MiB per
stream (``out-truncated``/``err-truncated`` say when more was cut). The agent has no kill
command: a command that outlives its timeout, or whose caller is interrupted, is killed
with its descendants by a second guest-exec'd ``sh``.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import json
import secrets
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from kvmlab.guest.errors import (
    AgentCommandError,
    AgentConnectError,
    AgentError,
    AgentProtocolError,
    AgentStateError,
    AgentTimeout,
    GuestCommandFailed,
    GuestExecInterrupted,
    GuestExecTimeout,
    GuestInputTooLarge,
    GuestOutputTruncated,
)

SENTINEL = b"\xff"
STATUS_TIMEOUT = 60.0  # the longest wait for one guest-exec-status answer
MAX_OUTPUT = 16 * 1024 * 1024  # qemu-ga keeps this much of each stream (GUEST_EXEC_MAX_OUTPUT)
MAX_REQUEST = 64 * 1024 * 1024  # QEMU's JSON parser refuses longer messages (MAX_TOKEN_SIZE)
MAX_INPUT = 47 * 1024 * 1024  # base64 makes it 62.7 MiB: the rest of the request fits beside it
INPUT_RATE = 128 * 1024  # bytes/s a slow guest's agent takes at worst (TCG L1: 1.5 MB/s)
KILL_TIMEOUT = 5.0  # the longest wait for the agent to start the kill
_MAX_LINE = 64 * 1024 * 1024  # two 16 MiB outputs in base64 and the JSON around them
_KILL_TREE = (  # stop each process before listing its children: none escapes by forking
    'k() { kill -STOP "$1"; for c in $(cat /proc/"$1"/task/*/children); do k "$c"; done; '
    'kill -KILL "$1"; } 2>/dev/null; k "$1"'
)


def kill_argv(pid: int) -> list[str]:
    """The guest command that SIGKILLs guest process ``pid`` and all its descendants."""
    return ["sh", "-c", _KILL_TREE, "kvmlab-kill", str(pid)]


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
    out_truncated: bool = False  # qemu-ga dropped stdout past MAX_OUTPUT bytes
    err_truncated: bool = False  # and stderr

    @property
    def truncated(self) -> bool:
        """Whether qemu-ga dropped output of either stream."""
        return self.out_truncated or self.err_truncated

    def check(self, argv: Sequence[str]) -> Self:
        """Raise :class:`GuestCommandFailed` unless the command exited with 0."""
        if self.returncode != 0:
            raise GuestCommandFailed(argv, self.returncode, self.stderr)
        return self

    def complete(self, argv: Sequence[str]) -> Self:
        """Raise :class:`GuestOutputTruncated` if qemu-ga cut stdout or stderr."""
        streams = [
            name
            for name, cut in (("stdout", self.out_truncated), ("stderr", self.err_truncated))
            if cut
        ]
        if streams:
            raise GuestOutputTruncated(argv, self.returncode, streams, MAX_OUTPUT)
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
        self._awaiting: str | None = None  # the command being sent or answered
        self._message: dict[str, object] | None = None  # the last one read (see exec_start)
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
        self._awaiting = None
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
        self._awaiting = None
        self._send(sock, SENTINEL + json.dumps(request).encode() + b"\n", deadline)
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
        self._awaiting = command
        self._send(sock, json.dumps(request).encode() + b"\n", deadline)
        answer = self._read_message(sock, deadline, command)
        self._awaiting = None
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
        self._send(sock, json.dumps(request).encode() + b"\n", time.monotonic() + timeout)

    def exec_start(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        capture: bool = True,
        timeout: float = 5.0,
    ) -> int:
        """Start ``argv`` in the guest (searched in PATH); return its guest pid.

        ``input`` (at most :data:`MAX_INPUT` bytes) is the command's stdin, else /dev/null;
        sending it gets ``timeout`` plus the time a slow guest takes to read it. If the
        caller is interrupted once the request is out, the command is killed.
        """
        if not argv:
            raise ValueError("empty argv")
        if input is not None and len(input) > MAX_INPUT:
            raise GuestInputTooLarge(len(input), MAX_INPUT)
        args: dict[str, object] = {
            "path": argv[0],
            "arg": list(argv[1:]),
            "capture-output": capture,
        }
        if input is not None:
            args["input-data"] = base64.b64encode(input).decode()
            timeout += len(input) / INPUT_RATE
        if env is not None:
            args["env"] = [f"{k}={v}" for k, v in env.items()]
        self._message = None
        try:
            ret = self.execute("guest-exec", args, timeout)
        except KeyboardInterrupt as exc:
            with _interrupts_ignored():
                late = self._answered_pid()  # the answer was read: it names the command
                if late is None and self._awaiting == "guest-exec":
                    late = self._pid_in_flight()  # sent: its answer may still come
                if late is None:
                    raise  # nothing was sent: nothing started
                killed = self._kill(late)
            raise GuestExecInterrupted(argv, late, killed) from exc
        if not isinstance(ret, dict) or not isinstance(ret.get("pid"), int):
            raise AgentProtocolError(f"guest-exec: unexpected answer {ret!r}")
        pid: int = ret["pid"]
        return pid

    def _answered_pid(self) -> int | None:
        """The pid of the guest-exec whose answer was read last (an interrupt may come
        between reading it and the caller holding the pid), if that is what was read."""
        ret = self._message.get("return") if self._message is not None else None
        pid = ret.get("pid") if isinstance(ret, dict) else None
        return pid if isinstance(pid, int) else None

    def _pid_in_flight(self) -> int | None:
        """Resync after an interrupted guest-exec; the pid it was answered with, if any.

        The request may have got out whole or in part: the sync's 0xFF drops a partial one,
        and every answer before the sync's is read, so either way the stream ends in step.
        """
        try:
            sock = self._need_socket()
            deadline = time.monotonic() + KILL_TIMEOUT
            sync_id = secrets.randbelow(2**31)
            request = {"execute": "guest-sync-delimited", "arguments": {"id": sync_id}}
            self._send(sock, SENTINEL + json.dumps(request).encode() + b"\n", deadline)
            pid = None
            while True:
                line = self._read_line(sock, deadline, "guest-exec")
                synced = SENTINEL in line
                with contextlib.suppress(ValueError):
                    answer = json.loads(line.rpartition(SENTINEL)[2])
                    ret = answer.get("return") if isinstance(answer, dict) else None
                    if synced and ret == sync_id:
                        self._awaiting = None
                        self.state = AgentState.READY
                        return pid
                    if not synced and isinstance(ret, dict) and isinstance(ret.get("pid"), int):
                        pid = ret["pid"]
        except AgentError:
            return None

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
            out_truncated=ret.get("out-truncated") is True,
            err_truncated=ret.get("err-truncated") is True,
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

        The command (with its descendants) is killed when it outlives ``timeout`` seconds
        (:class:`GuestExecTimeout`), when the caller is interrupted (Ctrl-C, or a signal
        handler raising KeyboardInterrupt: :class:`GuestExecInterrupted`; further interrupts
        are ignored until the kill is done) and when waiting for it fails.
        """
        if not timeout > 0:  # also NaN
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        deadline = time.monotonic() + timeout
        pid: int | None = None
        try:
            pid = self.exec_start(argv, input=input, env=env, timeout=min(timeout, STATUS_TIMEOUT))
            result = self._wait(pid, deadline)
        except GuestExecInterrupted:
            raise  # interrupted while starting: exec_start killed what it started
        except KeyboardInterrupt as exc:
            with _interrupts_ignored():
                if pid is None:  # between exec_start's answer and this frame holding it
                    pid = self._answered_pid()
                if pid is None:
                    raise
                killed = self._kill(pid)
            raise GuestExecInterrupted(argv, pid, killed) from exc
        except BaseException:
            if pid is not None:
                with _interrupts_ignored():
                    self._kill(pid)
            raise
        if result is None:
            with _interrupts_ignored():
                self._kill(pid)
            raise GuestExecTimeout(argv, timeout, pid)
        return result.check(argv) if check else result

    def _wait(self, pid: int, deadline: float) -> ExecResult | None:
        """Poll until ``pid`` exits (its result) or the deadline passes (None)."""
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
                return result
            if time.monotonic() + delay > deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)  # long commands: fewer polls of a busy guest

    def _kill(self, pid: int, confirm: float = 10.0) -> bool:
        """SIGKILL ``pid`` and its descendants (best effort); whether it was seen to end."""
        try:
            self.exec_start(kill_argv(pid), capture=False, timeout=KILL_TIMEOUT)
        except AgentError:
            return False
        deadline = time.monotonic() + confirm
        try:
            while time.monotonic() < deadline:
                left = max(0.1, deadline - time.monotonic())
                if self.exec_status(pid, timeout=left) is not None:
                    return True
                time.sleep(0.02)
        except AgentCommandError:
            return True  # the agent no longer knows the pid: it ended and was reported
        except AgentError:
            pass
        return False

    def _need_socket(self) -> socket.socket:
        if self._sock is None:
            raise AgentStateError(
                f"guest agent client for {self.path} is {self.state.value}: call connect() "
                "or wait_ready() first"
            )
        return self._sock

    def _send(self, sock: socket.socket, data: bytes, deadline: float) -> None:
        if len(data) > MAX_REQUEST:
            raise AgentProtocolError(
                f"request of {len(data)} bytes: the guest agent takes at most {MAX_REQUEST}"
            )
        try:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
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
            data = sock.recv(1 << 20)
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

    def _read_line(self, sock: socket.socket, deadline: float, what: str) -> bytes:
        """The next non-empty line of the stream, stripped."""
        scanned = 0  # a long answer arrives in many pieces: search each byte once
        while True:
            end = self._buf.find(b"\n", scanned)
            if end < 0:
                if len(self._buf) > _MAX_LINE:
                    self.state = AgentState.CONNECTED
                    raise AgentProtocolError(f"{what}: answer longer than {_MAX_LINE} bytes")
                scanned = len(self._buf)
                self._recv(sock, deadline, what)
                continue
            scanned = 0
            line = bytes(self._buf[:end]).strip()
            del self._buf[: end + 1]
            if line:
                return line

    def _read_message(self, sock: socket.socket, deadline: float, what: str) -> dict[str, object]:
        """The next non-empty line of the stream, as a JSON object."""
        line = self._read_line(sock, deadline, what)
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self.state = AgentState.CONNECTED
            raise AgentProtocolError(f"{what}: not a JSON object: {line[:200]!r}")
        self._message = message
        return message


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """Ignore SIGINT, SIGTERM and SIGHUP (main thread only): a guest command is being killed.

    The interrupt that started the kill is already on its way up; another one must not cut
    the kill short or end in a traceback. The kill is bounded (:data:`KILL_TIMEOUT`).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(sig)
        if handler is not None:  # None: set outside Python, cannot be put back
            previous[sig] = handler
            signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _b64(value: object) -> bytes:
    if value is None:
        return b""
    if not isinstance(value, str):
        raise AgentProtocolError(f"guest-exec-status: output is not base64 text: {value!r}")
    return base64.b64decode(value)
