"""Every connection to a libvirtd is bounded and interruptible: a peer that accepts and
never answers, or answers in another protocol, is one line (exit 4) within the
``libvirt-connect`` limit, and SIGTERM ends the wait at once (exit 130). The peers are
sockets this test serves; no libvirtd runs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KVMLAB, LABS


@pytest.fixture
def silent(short_tmp: Path) -> Iterator[str]:
    """A unix socket that accepts connections and never says a word; its libvirt URI."""
    path = short_tmp / "silent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    yield f"qemu+unix:///system?socket={path}"
    server.close()
    for conn in held:
        conn.close()


@pytest.fixture
def not_libvirt() -> Iterator[str]:
    """A TCP peer that answers in HTTP; its libvirt URI."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn = server.accept()[0]
            except OSError:
                return
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 8)

    threading.Thread(target=serve, daemon=True).start()
    yield f"qemu+tcp://127.0.0.1:{server.getsockname()[1]}/system"
    server.close()


def render(uri: str, tmp: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [KVMLAB, "render", str(LABS / "basic.toml"), "-f", "libvirt", "-c", uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "KVMLAB_RUN_DIR": str(tmp / "run"), **env},
    )


def test_a_peer_that_never_answers_is_one_line_within_the_limit(
    silent: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    proc = render(silent, tmp_path, KVMLAB_CEILING_LIBVIRT_CONNECT="1")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert out == ""
    first = err.splitlines()[0]
    assert "gave no libvirt answer within 1 s (limit 'libvirt-connect'" in first, err
    assert "fix: check what listens on" in err and "start libvirtd" not in err
    assert "KVMLAB_CEILING_LIBVIRT_CONNECT=SECONDS" in first
    assert time.monotonic() - began < 30


def test_sigterm_ends_the_wait_for_a_silent_peer_at_once(silent: str, tmp_path: Path) -> None:
    proc = render(silent, tmp_path)
    time.sleep(3)  # imports done, waiting on the peer (the default limit is 30 s)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 5
    assert "Traceback" not in err and "SystemError" not in err


def test_a_peer_that_is_no_libvirtd_is_said_so(not_libvirt: str, tmp_path: Path) -> None:
    proc = render(not_libvirt, tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    assert "the peer does not speak libvirt's protocol: is it a libvirtd?" in err
    assert "too large" not in err
    assert "fix: check what listens on 127.0.0.1 port" in err and "start libvirtd" not in err
