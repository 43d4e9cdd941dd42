"""A stand-in for qemu-ga on a unix socket, answering the way the real one does.

Recorded from qemu-ga 7.2 (``qemu-ga -m unix-listen``): a 0xFF byte yields a JSON parse
error answer, guest-sync-delimited's answer is preceded by 0xFF, every answer is one
line, guest-exec-status reports ``signal`` instead of ``exitcode`` for killed commands.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Program:
    """What a guest-exec'd argv does: how many status polls it runs for, how it ends."""

    polls: int = 0
    exitcode: int | None = 0
    signal: int | None = None
    out: bytes = b""
    err: bytes = b""
    echo_input: bool = False


@dataclass
class FakeAgent:
    path: Path
    programs: dict[tuple[str, ...], Program] = field(default_factory=dict)
    on_connect: bytes = b""  # stale bytes waiting in the channel for the client
    silent: bool = False  # read everything, answer nothing (agent not running yet)
    delay: dict[str, float] = field(default_factory=dict)  # command -> seconds before answering
    close_on: str | None = None  # command on which the channel drops
    requests: list[dict[str, object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._procs: dict[int, tuple[Program, int, bytes]] = {}

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
            with conn:
                self._talk(conn)

    def _talk(self, conn: socket.socket) -> None:
        conn.sendall(self.on_connect)
        conn.settimeout(0.05)
        buf = b""
        while not self._stop.is_set():
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            buf += data
            while b"\xff" in buf.split(b"\n", 1)[0] or b"\n" in buf:
                if buf.startswith(b"\xff"):
                    buf = buf[1:]
                    self._answer(
                        conn,
                        {
                            "error": {
                                "class": "GenericError",
                                "desc": "JSON parse error, stray '\\uFFFD'",
                            }
                        },
                    )
                    continue
                line, _, buf = buf.partition(b"\n")
                request = json.loads(line)
                self.requests.append(request)
                if request["execute"] == self.close_on:
                    return
                time.sleep(self.delay.get(request["execute"], 0))
                self._handle(conn, request)

    def _answer(self, conn: socket.socket, answer: dict[str, object], prefix: bytes = b"") -> None:
        if not self.silent:
            conn.sendall(prefix + json.dumps(answer).encode() + b"\n")

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
            if program is None:
                desc = f"Failed to execute child process “{argv[0]}”"
                self._answer(conn, {"error": {"class": "GenericError", "desc": desc}})
                return
            pid = 1000 + len(self._procs)
            self._procs[pid] = (program, 0, base64.b64decode(args.get("input-data", "")))
            self._answer(conn, {"return": {"pid": pid}})
        elif command == "guest-exec-status":
            program, polls, stdin = self._procs[args["pid"]]
            self._procs[args["pid"]] = (program, polls + 1, stdin)
            if polls < program.polls:
                self._answer(conn, {"return": {"exited": False}})
                return
            out = stdin if program.echo_input else program.out
            status: dict[str, object] = {
                "exited": True,
                "out-truncated": False,
                "err-truncated": False,
                "out-data": base64.b64encode(out).decode(),
                "err-data": base64.b64encode(program.err).decode(),
            }
            if program.signal is not None:
                status["signal"] = program.signal
            else:
                status["exitcode"] = program.exitcode
            self._answer(conn, {"return": status})
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
