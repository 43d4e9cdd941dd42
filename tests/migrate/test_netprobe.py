"""The network probe against a real UDP echo on this host: a pause of the echo (the fault,
made by the echo's side, not the prober) is measured as a gap, and its probes as lost."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from kvmlab.migrate.netprobe import NetworkProbe, free_udp_port


class Echo:
    """A UDP echo on ``host`` (127.0.0.1) that can be paused (it then reads and drops);
    it counts what it echoed."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = free_udp_port(host)
        self.echoed = 0
        self.paused = threading.Event()
        self.stop = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, self.port))
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
                self.echoed += 1


@contextlib.contextmanager
def running(host: str = "127.0.0.1") -> Iterator[Echo]:
    server = Echo(host)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.thread.join(2)
        server.sock.close()


@pytest.fixture
def echo() -> Iterator[Echo]:
    with running() as server:
        yield server


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


def test_probes_go_both_ways_and_the_echo_counts_where_the_guest_runs() -> None:
    """A guest migrating to another host is probed on both paths (127.0.0.2 stands in for
    the destination's forward): while the source echoes and after the destination takes
    over, every probe comes back once at least, and the hand-over is the only gap."""
    with running("127.0.0.1") as source, running("127.0.0.2") as dest:
        dest.paused.set()  # the destination's QEMU holds its forward, the guest is not there
        probe = NetworkProbe("127.0.0.1", source.port).start()
        try:
            probe.add_target("127.0.0.2", dest.port)
            time.sleep(0.3)
            t_switch = time.monotonic()
            source.paused.set()  # the switch-over: the guest stops on the source ...
            time.sleep(0.2)
            dest.paused.clear()  # ... and runs on the destination
            time.sleep(0.4)
            end = time.monotonic()
        finally:
            probe.stop()
        assert source.echoed > 100 and dest.echoed > 200, (source.echoed, dest.echoed)
        gap = probe.longest_gap(t_switch - 0.05, end)
        assert gap is not None and 0.15 <= gap.seconds < 1.0, gap
        calm = probe.longest_gap(t_switch + 0.3, end)
        assert calm is not None and calm.seconds < 0.2, calm
        assert probe.loss(t_switch + 0.3, end - 0.05).lost == 0


def test_a_destination_with_no_route_is_refused_at_once() -> None:
    probe = NetworkProbe("127.0.0.1", free_udp_port())
    with pytest.raises(OSError):
        probe.add_target("256.1.1.1", 9)
    probe.stop()


def test_echoes_on_their_way_when_sending_stops_are_still_counted() -> None:
    delay = 0.1
    replies: list[tuple[float, bytes, tuple[str, int]]] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(0.01)
        probe = NetworkProbe("127.0.0.1", sock.getsockname()[1]).start()
        end = time.monotonic() + 0.5
        stopped_at: int | None = None
        while time.monotonic() < end:  # an echo that answers each probe 0.1 s late
            with contextlib.suppress(TimeoutError):
                data, peer = sock.recvfrom(64)
                replies.append((time.monotonic() + delay, data, peer))
            while replies and replies[0][0] <= time.monotonic():
                _, data, peer = replies.pop(0)
                sock.sendto(data, peer)
            if stopped_at is None and time.monotonic() > end - 0.3:
                probe.stop_sending()
                stopped_at = probe.echoes
        probe.stop()
    assert stopped_at is not None and probe.echoes > stopped_at  # they came after the stop
    assert probe.echoes == len(probe.sent)  # every probe sent came back
