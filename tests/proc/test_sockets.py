"""A process's TCP connections from /proc, and closing one from outside with ``ss -K``:
on a real connection of this test's own process."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator

import pytest

from kvmlab.proc.sockets import close_connection, parse_tcp_table, tcp_connections


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected client and server end on loopback."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        try:
            yield client, accepted
        finally:
            client.close()
            accepted.close()


def test_this_process_holds_both_ends(pair: tuple[socket.socket, socket.socket]) -> None:
    client, accepted = pair
    conns = tcp_connections(os.getpid())
    mine = (client.getsockname()[1], accepted.getsockname()[1])
    assert any((c.local_port, c.remote_port) == mine and c.remote == "127.0.0.1" for c in conns)


def test_the_table_is_read_by_inode_and_state() -> None:
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100FD0A:9320 0200FD0A:C001 01 00000000:00000000 00:00000000 00000000     0 "
        "       0 4242 1 0000000000000000 20 4 30 10 -1\n"
        "   1: 0100FD0A:9321 0200FD0A:C001 0A 00000000:00000000 00:00000000 00000000     0 "
        "       0 4243 1 0000000000000000 20 4 30 10 -1\n"
    )
    got = parse_tcp_table(table, {"4242", "4243"})
    assert [(c.local, c.local_port, c.remote, c.remote_port) for c in got] == [
        ("10.253.0.1", 0x9320, "10.253.0.2", 0xC001)  # the listening one (0A) is left out
    ]
    assert parse_tcp_table(table, {"9999"}) == []


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_a_connection_closed_from_outside_is_an_error_to_its_holder(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, _ = pair
    port = client.getsockname()[1]
    (mine,) = [c for c in tcp_connections(os.getpid()) if c.local_port == port]
    if not close_connection(mine):
        pytest.skip("this kernel cannot destroy sockets (CONFIG_INET_DIAG_DESTROY)")
    with pytest.raises(OSError):
        client.send(b"x")
        client.recv(1)
