"""What ``kvmlab exec`` forwards from its stdin, and ``console`` fed from files (no guest)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.cli import exec_cmds
from kvmlab.cli.console import attach
from kvmlab.cli.exec_cmds import read_input
from kvmlab.guest.errors import GuestInputTooLarge


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    """A pipe; the test may close the write end (and only that)."""
    r, w = os.pipe()
    yield r, w
    os.close(r)
    with contextlib.suppress(OSError):
        os.close(w)


def test_a_pipe_is_read_to_its_end(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, b"\x00\xffdata")
    os.close(w)
    assert read_input(r) == b"\x00\xffdata"


def test_empty_closed_and_terminal_stdin_forward_nothing() -> None:
    r, w = os.pipe()
    os.close(w)
    assert read_input(r) is None
    os.close(r)
    assert read_input(r) is None  # fd closed
    main, terminal = pty.openpty()
    try:
        assert read_input(terminal) is None  # never read, though it never ends
    finally:
        os.close(main)
        os.close(terminal)


def test_input_over_the_limit_is_refused_without_reading_it_all(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, b"x" * 11)  # the writer stays open: the limit, not EOF, ends the read
    with pytest.raises(GuestInputTooLarge, match=r"\(11 bytes or more\)") as info:
        read_input(r, limit=10)
    assert info.value.exit_code == 2


def test_slow_non_blocking_pipe_is_waited_for_and_explained(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    r, w = pipe
    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_NONBLOCK)
    monkeypatch.setattr(exec_cmds, "STDIN_HINT_AFTER", 0.1)

    def writer() -> None:
        time.sleep(0.4)
        os.write(w, b"late")
        os.close(w)

    threading.Thread(target=writer).start()
    assert read_input(r) == b"late"
    assert "waiting for the end of stdin" in capsys.readouterr().err


def serve_console(path: Path, take_input: bool) -> list[bytes]:
    """A console socket that greets and, if ``take_input``, records what it is sent."""
    received: list[bytes] = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            conn.sendall(b"login: ")
            while take_input and (data := conn.recv(4096)):
                received.append(data)
            if not take_input:
                time.sleep(3)

    threading.Thread(target=serve, daemon=True).start()
    return received


@pytest.mark.parametrize("source", ["/dev/null", "file"])
def test_console_reads_unpollable_stdin_directly(tmp_path: Path, source: str) -> None:
    received = serve_console(tmp_path / "console.sock", take_input=True)
    keys = Path(source) if source == "/dev/null" else tmp_path / "keys"
    if source == "file":
        keys.write_bytes(b"root\n" * 50000)  # more than one read, more than the backlog
    out_r, out_w = os.pipe()
    with keys.open("rb") as stdin:
        start = time.monotonic()
        attach(tmp_path / "console.sock", stdin=stdin.fileno(), stdout=out_w, quiet=0.3)
    assert time.monotonic() - start < 5
    os.close(out_w)
    assert os.read(out_r, 100) == b"login: "
    os.close(out_r)
    deadline = time.monotonic() + 5
    expected = b"" if source == "/dev/null" else b"root\n" * 50000
    while b"".join(received) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b"".join(received) == expected
