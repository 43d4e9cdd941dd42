"""The network probe against a real UDP echo on this host: a pause of the echo (the fault,
made by the echo's side, not the prober) is measured as a gap, and its probes as lost."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from kvmlab.migrate.netprobe import NetworkProbe, free_udp_port


class Echo:
    """A UDP echo on 127.0.0.1 that can be paused (it then reads and drops)."""

    def __init__(self) -> None:
        self.port = free_udp_port()
        self.paused = threading.Event()
        self.stop = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.settimeout(0.05)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                data, peer = self.sock.recvfrom(64)
            except TimeoutError:
                continue
            if not self.paused.is_set():
                self.sock.sendto(data, peer)


@pytest.fixture
def echo() -> Iterator[Echo]:
    server = Echo()
    server.thread.start()
    yield server
    server.stop.set()
    server.thread.join(2)
    server.sock.close()


def test_a_pause_of_the_echo_is_a_gap_and_its_probes_are_lost(echo: Echo) -> None:
    probe = NetworkProbe("127.0.0.1", echo.port).start()
    try:
        time.sleep(0.5)
        t_pause = time.monotonic()
        echo.paused.set()
        time.sleep(0.4)
        echo.paused.clear()
        time.sleep(0.5)
        end = time.monotonic()
    finally:
        probe.stop()
    gap = probe.longest_gap(t_pause - 0.1, end)
    assert gap is not None and 0.35 <= gap.seconds <= 2.0, gap
    loss = probe.loss(t_pause - 0.1, end)
    assert loss.sent > 300 and loss.lost >= 100, loss  # ~400 probes went unanswered
    calm = probe.longest_gap(t_pause - 0.45, t_pause - 0.05)
    assert calm is not None and calm.seconds < 0.2, calm


def test_probes_to_a_port_nobody_holds_are_all_lost() -> None:
    probe = NetworkProbe("127.0.0.1", free_udp_port()).start()
    t0 = time.monotonic()
    time.sleep(0.3)
    probe.stop()
    loss = probe.loss(t0, time.monotonic())
    assert probe.arrivals == [] and loss.sent > 0 and loss.lost == loss.sent
