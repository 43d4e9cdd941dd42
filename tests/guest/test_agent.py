"""The guest agent client against a recorded-behaviour fake and against the host's qemu-ga."""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kvmlab.guest.agent import MAX_INPUT, MAX_OUTPUT, AgentState, GuestAgent, kill_argv
from kvmlab.guest.errors import (
    AgentCommandError,
    AgentConnectError,
    AgentStateError,
    AgentTimeout,
    GuestCommandFailed,
    GuestExecInterrupted,
    GuestExecTimeout,
    GuestInputTooLarge,
    GuestOutputTruncated,
)

from .fake_agent import FakeAgent, Program
from .host_agent import start_host_agent, stop


@pytest.fixture(autouse=True)
def _sigint_raises() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt here even when the suite was started with SIGINT
    ignored (a background job, as CI and the fresh-machine check may run it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeAgent]:
    agent = FakeAgent(tmp_path / "qga.sock")
    yield agent
    agent.stop()


def test_sync_skips_stale_answers(fake: FakeAgent) -> None:
    fake.on_connect = b'{"return": {"pid": 3}}\n\xff{"return": 99}\n{"ret'
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        assert agent.state is AgentState.READY
        agent.ping()
    assert [r["execute"] for r in fake.requests] == ["guest-sync-delimited", "guest-ping"]


def test_exec_returns_code_and_output(fake: FakeAgent) -> None:
    fake.programs[("uname", "-r")] = Program(polls=3, out=b"6.1.0-56-amd64\n")
    fake.programs[("cat",)] = Program(echo_input=True)
    fake.programs[("sh", "-c", "kill -9 $$")] = Program(signal=9, err=b"bye\n")
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        result = agent.exec(["uname", "-r"], timeout=5)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"6.1.0-56-amd64\n", b"")
        assert agent.exec(["cat"], input=b"\x00\xffdata", timeout=5).stdout == b"\x00\xffdata"
        killed = agent.exec(["sh", "-c", "kill -9 $$"], timeout=5)
        assert (killed.returncode, killed.stderr) == (-9, b"bye\n")


def test_check_raises_with_stderr(fake: FakeAgent) -> None:
    fake.programs[("false",)] = Program(exitcode=1, err=b"it failed\n")
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(GuestCommandFailed, match="exited with 1") as info:
            agent.exec(["false"], check=True, timeout=5)
    assert info.value.lines()[-1] == "  | it failed"


def test_agent_errors_become_command_errors(fake: FakeAgent) -> None:
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(AgentCommandError, match="CommandNotFound") as info:
            agent.execute("guest-nope")
        assert info.value.error_class == "CommandNotFound"
        with pytest.raises(AgentCommandError, match="Failed to execute child process"):
            agent.exec(["/nonexistent"], timeout=5)
        agent.ping()  # still in step


def test_exec_timeout_kills_the_command(fake: FakeAgent) -> None:
    fake.programs[("sleep", "100")] = Program(polls=10**6)
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        start = time.monotonic()
        with pytest.raises(GuestExecTimeout) as info:
            agent.exec(["sleep", "100"], timeout=0.3)
        assert time.monotonic() - start < 1.5
        assert info.value.pid == 1000
    kill, confirm = fake.requests[-2:]
    assert kill == {
        "execute": "guest-exec",
        "arguments": {"path": "sh", "arg": kill_argv(1000)[1:], "capture-output": False},
    }
    assert confirm == {"execute": "guest-exec-status", "arguments": {"pid": 1000}}


def test_silent_agent_times_out(fake: FakeAgent) -> None:
    fake.silent = True
    with GuestAgent(fake.path) as agent:
        start = time.monotonic()
        with pytest.raises(AgentTimeout, match=r"did not answer within 0\.5s"):
            agent.wait_ready(0.5, attempt=0.2)
        assert time.monotonic() - start < 1.5


def test_late_answer_after_timeout_is_discarded(fake: FakeAgent) -> None:
    fake.delay["guest-ping"] = 0.4
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(AgentTimeout):
            agent.ping(timeout=0.1)
        assert agent.state is AgentState.CONNECTED
        fake.delay.clear()
        fake.programs[("true",)] = Program()
        assert agent.exec(["true"], timeout=5).returncode == 0  # re-synced past the late pong


def test_channel_closed_is_a_connect_error(fake: FakeAgent) -> None:
    fake.close_on = "guest-ping"
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(AgentConnectError, match="closed"):
            agent.ping()
        assert agent.state is AgentState.CLOSED
        with pytest.raises(AgentStateError):
            agent.ping()


def test_missing_socket_and_misuse(tmp_path: Path) -> None:
    agent = GuestAgent(tmp_path / "nothing.sock")
    with pytest.raises(AgentStateError, match="call connect"):
        agent.exec(["true"])
    start = time.monotonic()
    with pytest.raises(AgentConnectError, match=r"within 0\.2s"):
        agent.connect(timeout=0.2)
    assert time.monotonic() - start < 1.0


def test_output_past_16_mib_is_flagged_per_stream(fake: FakeAgent) -> None:
    fake.programs[("big",)] = Program(out=b"o" * (MAX_OUTPUT + 1), err=b"e\n", exitcode=4)
    fake.programs[("exact",)] = Program(out=b"o" * MAX_OUTPUT)
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        big = agent.exec(["big"], timeout=20)
        assert (len(big.stdout), big.stderr) == (MAX_OUTPUT, b"e\n")
        assert (big.out_truncated, big.err_truncated, big.truncated) == (True, False, True)
        with pytest.raises(GuestOutputTruncated) as info:
            big.complete(["big"])
        assert info.value.exit_code == 3
        assert "more than 16 MiB to stdout" in str(info.value)
        assert "exited with 4" in str(info.value)
        assert "read that in parts under 16 MiB" in info.value.lines()[1]
        exact = agent.exec(["exact"], timeout=20)
        assert exact.complete(["exact"]) is exact and len(exact.stdout) == MAX_OUTPUT


def sigint_on(nth: int, command: str) -> Callable[[dict[str, object]], None]:
    """An on_request hook sending this process SIGINT when ``command`` arrives the nth time."""
    seen: list[object] = []

    def hook(request: dict[str, object]) -> None:
        if request["execute"] == command:
            seen.append(request)
            if len(seen) == nth:
                os.kill(os.getpid(), signal.SIGINT)

    return hook


def test_ctrl_c_kills_the_guest_command(fake: FakeAgent) -> None:
    fake.programs[("sleep", "60")] = Program(polls=10**6)
    fake.on_request = sigint_on(3, "guest-exec-status")
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(GuestExecInterrupted) as info:
            agent.exec(["sleep", "60"], timeout=30)
        assert isinstance(info.value, KeyboardInterrupt)
        assert (info.value.pid, info.value.killed) == (1000, True)
        assert str(info.value) == "guest command ['sleep', '60'] (guest pid 1000) was killed"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        fake.on_request = None
        agent.ping()  # the stream is in step again
    execs = [r["arguments"] for r in fake.requests if r["execute"] == "guest-exec"]
    assert [a["path"] for a in execs] == ["sleep", "sh"]
    assert execs[1]["arg"] == kill_argv(1000)[1:]


def test_second_ctrl_c_during_the_kill_is_ignored(fake: FakeAgent) -> None:
    fake.programs[("sleep", "60")] = Program(polls=10**6)
    first, second = sigint_on(2, "guest-exec-status"), sigint_on(2, "guest-exec")

    def hook(request: dict[str, object]) -> None:
        first(request)
        second(request)  # arrives while the kill is being sent
        if request["execute"] == "guest-exec":
            fake.delay["guest-exec"] = 0.2

    fake.on_request = hook
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(GuestExecInterrupted) as info:
            agent.exec(["sleep", "60"], timeout=30)
        assert info.value.killed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_before_guest_exec_answered_kills_what_it_started(fake: FakeAgent) -> None:
    fake.programs[("sleep", "60")] = Program(polls=10**6)
    fake.delay["guest-exec"] = 0.3
    fake.on_request = sigint_on(1, "guest-exec")
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(GuestExecInterrupted) as info:
            agent.exec(["sleep", "60"], timeout=30)
        assert (info.value.pid, info.value.killed) == (1000, True)
    assert fake.requests[-2]["arguments"] == {
        "path": "sh",
        "arg": kill_argv(1000)[1:],
        "capture-output": False,
    }


@pytest.mark.parametrize("where", ["answer read", "pid returned"])
def test_ctrl_c_once_guest_exec_was_answered_kills_what_it_started(
    fake: FakeAgent, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The interrupt lands after guest-exec's answer was read but before the code waiting
    for the command holds its pid (inside execute, or just after exec_start returned): the
    command is still killed, not left running."""
    fake.programs[("sleep", "60")] = Program(polls=10**6)
    if where == "answer read":
        real_read, interrupted = GuestAgent._read_message, list[object]()

        def read_then_interrupted(
            self: GuestAgent, sock: socket.socket, deadline: float, what: str
        ) -> dict[str, object]:
            message = real_read(self, sock, deadline, what)
            if what == "guest-exec" and not interrupted:  # the sleep's answer, not the kill's
                interrupted.append(message)
                raise KeyboardInterrupt
            return message

        monkeypatch.setattr(GuestAgent, "_read_message", read_then_interrupted)
    else:
        real_start = GuestAgent.exec_start

        def started_then_interrupted(self: GuestAgent, argv: list[str], **kw: Any) -> int:
            if argv[0] == "sleep":
                real_start(self, argv, **kw)
                raise KeyboardInterrupt
            return real_start(self, argv, **kw)

        monkeypatch.setattr(GuestAgent, "exec_start", started_then_interrupted)
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(GuestExecInterrupted) as info:
            agent.exec(["sleep", "60"], timeout=30)
        assert (info.value.pid, info.value.killed) == (1000, True)
    assert any(
        r["arguments"] == {"path": "sh", "arg": kill_argv(1000)[1:], "capture-output": False}
        for r in fake.requests
        if r["execute"] == "guest-exec"
    )


def test_ctrl_c_while_the_request_is_sent_starts_nothing(fake: FakeAgent) -> None:
    fake.programs[("cat",)] = Program(echo_input=True)
    fake.read_delay = 0.1  # 8 MiB of input take the fake about a second to read
    timer = threading.Timer(0.3, os.kill, [os.getpid(), signal.SIGINT])
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        timer.start()
        with pytest.raises(KeyboardInterrupt) as info:
            agent.exec(["cat"], input=bytes(8 << 20), timeout=30)
        assert not isinstance(info.value, GuestExecInterrupted)
        fake.read_delay = 0
        agent.ping()  # the partial request was dropped (0xFF) and the stream is in step
    assert [r["execute"] for r in fake.requests] == ["guest-sync-delimited"] * 2 + ["guest-ping"]


def test_too_much_input_and_bad_timeouts_are_refused_before_anything_runs(
    fake: FakeAgent,
) -> None:
    fake.programs[("cat",)] = Program(echo_input=True)
    with GuestAgent(fake.path) as agent:
        agent.wait_ready(5)
        with pytest.raises(GuestInputTooLarge, match="over 47 MiB") as info:
            agent.exec(["cat"], input=bytes(MAX_INPUT + 1))
        assert info.value.exit_code == 2
        for timeout in (0.0, -1.0, math.nan):
            with pytest.raises(ValueError, match="positive number of seconds"):
                agent.exec(["cat"], timeout=timeout)
    assert [r["execute"] for r in fake.requests] == ["guest-sync-delimited"]


@pytest.mark.functional
@pytest.mark.skipif(shutil.which("qemu-ga") is None, reason="qemu-guest-agent not installed")
def test_against_the_hosts_qemu_ga(tmp_path: Path) -> None:
    """The real agent, listening on a unix socket on the host: same protocol, no VM."""
    sock = tmp_path / "qga.sock"
    proc = start_host_agent(sock, tmp_path)
    try:
        with GuestAgent(sock) as agent:
            agent.wait_ready(10)
            agent.ping()
            result = agent.exec(["sh", "-c", "cat; echo err >&2; exit 3"], input=b"in\n")
            assert (result.returncode, result.stdout, result.stderr) == (3, b"in\n", b"err\n")
            assert agent.exec(["sh", "-c", "kill -9 $$"]).returncode == -9
            with pytest.raises(AgentCommandError):
                agent.exec(["/nonexistent/program"])
        with GuestAgent(sock) as agent:  # a second client gets in step despite the first
            agent.wait_ready(10)
    finally:
        stop(proc)
