"""A stand-in for qemu-ga on a unix socket, answering the way the real one does.

Recorded from qemu-ga 7.2 (``qemu-ga -m unix-listen``): a 0xFF byte yields a JSON parse
error answer, guest-sync-delimited's answer is preceded by 0xFF, every answer is one
line, guest-exec-status reports ``signal`` instead of ``exitcode`` for killed commands.
guest-exec (7.2.22): ``input-data`` is the command's stdin (else /dev/null); each output
stream is kept up to 16 MiB; ``out-data``/``out-truncated`` (and ``err-``) appear only
when that stream has data and output is captured; the status of an exited command is
given once, after which its pid is unknown ("Invalid parameter 'pid'"); a request over
64 MiB of JSON is refused ("JSON token size limit exceeded").
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvmlab.guest.agent import kill_argv

MAX_OUTPUT = 16 * 1024 * 1024  # GUEST_EXEC_MAX_OUTPUT
MAX_REQUEST = 64 * 1024 * 1024  # the JSON parser's MAX_TOKEN_SIZE


@dataclass
class Program:
    """What a guest-exec'd argv does: how many status polls it runs for, how it ends."""

    polls: int = 0
    exitcode: int | None = 0
    signal: int | None = None
    out: bytes = b""
    err: bytes = b""
    echo_input: bool = False
    kills: int | None = None  # SIGKILLs this guest pid when started (the kill-tree sh)


@dataclass
class Proc:
    """A started program: how often its status was asked for, its stdin, how it ended."""

    program: Program
    capture: bool
    stdin: bytes
    polls: int = 0
    killed: bool = False


@dataclass
class FakeAgent:
    path: Path
    programs: dict[tuple[str, ...], Program] = field(default_factory=dict)
    on_connect: bytes = b""  # stale bytes waiting in the channel for the client
    silent: bool = False  # read everything, answer nothing (agent not running yet)
    delay: dict[str, float] = field(default_factory=dict)  # command -> seconds before answering
    close_on: str | None = None  # command on which the channel drops
    requests: list[dict[str, Any]] = field(default_factory=list)
    on_request: Callable[[dict[str, object]], None] | None = None  # called before answering
    read_delay: float = 0.0  # seconds after each read of up to 1 MiB (a slow guest channel)

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._procs: dict[int, Proc] = {}
        self._next_pid = 1000

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)

    def _serve(self) -> None:
        self._listener.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn, contextlib.suppress(OSError):  # the client went away
                self._talk(conn)

    def _talk(self, conn: socket.socket) -> None:
        conn.sendall(self.on_connect)
        conn.settimeout(0.05)
        buf = bytearray()
        scanned = 0  # bytes of buf known to hold neither a newline nor 0xFF
        while not self._stop.is_set():
            try:
                data = conn.recv(1 << 20)
            except TimeoutError:
                continue
            if not data:
                return
            time.sleep(self.read_delay)
            buf += data
            while True:
                newline, sentinel = buf.find(b"\n", scanned), buf.find(b"\xff", scanned)
                if newline < 0 and sentinel < 0:
                    scanned = len(buf)
                    break
                scanned = 0
                if sentinel >= 0 and (newline < 0 or sentinel < newline):
                    del buf[: sentinel + 1]  # 0xFF: the parser drops what it had, says so
                    desc = "JSON parse error, stray '\\uFFFD'"
                    self._answer(conn, {"error": {"class": "GenericError", "desc": desc}})
                    continue
                line = bytes(buf[:newline])
                del buf[: newline + 1]
                if not line.strip():
                    continue
                if len(line) > MAX_REQUEST:
                    error = {"class": "GenericError", "desc": "JSON token size limit exceeded"}
                    self._answer(conn, {"error": error})
                    continue
                request = json.loads(line)
                self.requests.append(request)
                if request["execute"] == self.close_on:
                    return
                if self.on_request is not None:
                    self.on_request(request)
                time.sleep(self.delay.get(request["execute"], 0))
                self._handle(conn, request)

    def _answer(self, conn: socket.socket, answer: dict[str, object], prefix: bytes = b"") -> None:
        if not self.silent:
            conn.settimeout(30)  # a 16 MiB output takes a while to be read
            conn.sendall(prefix + json.dumps(answer).encode() + b"\n")
            conn.settimeout(0.05)

    def _handle(self, conn: socket.socket, request: dict[str, object]) -> None:
        args = request.get("arguments", {})
        assert isinstance(args, dict)
        command = request["execute"]
        if command == "guest-sync-delimited":
            self._answer(conn, {"return": args["id"]}, prefix=b"\xff")
        elif command == "guest-ping":
            self._answer(conn, {"return": {}})
        elif command == "guest-exec":
            argv = (args["path"], *args.get("arg", []))
            program = self.programs.get(argv)
            if program is None and argv[-2:-1] == ("kvmlab-kill",):  # what sh would do
                target = int(argv[-1])
                if list(argv) == kill_argv(target):
                    program = Program(kills=target)
            if program is None:
                desc = f"Failed to execute child process “{argv[0]}”"
                self._answer(conn, {"error": {"class": "GenericError", "desc": desc}})
                return
            pid = self._next_pid
            self._next_pid += 1
            stdin = base64.b64decode(args.get("input-data", ""))
            self._procs[pid] = Proc(program, args.get("capture-output") is True, stdin)
            if program.kills in self._procs:
                self._procs[program.kills].killed = True
            self._answer(conn, {"return": {"pid": pid}})
        elif command == "guest-exec-status":
            proc = self._procs.get(args["pid"])
            if proc is None:
                desc = "Invalid parameter 'pid'"
                self._answer(conn, {"error": {"class": "GenericError", "desc": desc}})
                return
            proc.polls += 1
            self._answer(conn, {"return": self._status(args["pid"], proc)})
        else:
            self._answer(
                conn,
                {
                    "error": {
                        "class": "CommandNotFound",
                        "desc": f"The command {command} has not been found",
                    }
                },
            )

    def _status(self, pid: int, proc: Proc) -> dict[str, object]:
        program = proc.program
        if proc.polls <= program.polls and not proc.killed:
            return {"exited": False}
        del self._procs[pid]
        status: dict[str, object] = {"exited": True}
        if proc.killed:
            status["signal"] = 9
        elif program.signal is not None:
            status["signal"] = program.signal
        else:
            status["exitcode"] = program.exitcode
        out = proc.stdin if program.echo_input else program.out
        for name, data in (("out", out), ("err", program.err)):
            if proc.capture and data:
                status[f"{name}-data"] = base64.b64encode(data[:MAX_OUTPUT]).decode()
                status[f"{name}-truncated"] = len(data) > MAX_OUTPUT
        return status
