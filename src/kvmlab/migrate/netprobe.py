"""Downtime as the network sees it: UDP probes from the host, echoed by the guest.

Operators judge a migration by what the network loses, which neither QEMU's downtime nor
the guest's heartbeats show: a guest on user networking is reached through the host port
forward QEMU holds, and that forward moves to the destination only once the guest runs
there. A thread here sends a numbered, timestamped datagram every millisecond to a UDP
port forwarded to the guest, where ``kvmlab-echo`` sends each back; another thread
notes each echo's arrival. The longest pause between echoes around the switch-over (the
same window and steadiness rule as the heartbeats') is the downtime the network saw, and
the probes sent in it that never came back are the loss.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kvmlab.migrate.probe import Arrivals

RATE_HZ = 1000
"""Probes a second (operators ping at 1 kHz to see a switch-over's gap)."""
GUEST_PORT = 7777
"""The UDP port ``kvmlab-echo`` listens on in the guest."""
_PACKET = struct.Struct("!Qd")
"""A probe: its sequence number and the host's monotonic time it was sent."""


@dataclass(frozen=True)
class Loss:
    """Probes sent in a window, and how many of them never came back."""

    sent: int
    lost: int


class NetworkProbe(Arrivals):
    """Probes to ``(host, port)`` at :data:`RATE_HZ`; ``arrivals`` are the echoes' times.

    A guest migrating to another host can be probed on both paths at once: each probe
    goes to every target, and an echo from either counts (the guest answers where it runs,
    like an address that moves with it)."""

    def __init__(
        self, host: str, port: int, make_socket: Callable[[], socket.socket] | None = None
    ) -> None:
        super().__init__()
        self.target = (host, port)
        self._make_socket = make_socket or (
            lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        )
        self.sent: list[float] = []
        """When each probe went out (its sequence number is its index)."""
        self.echoed: set[int] = set()
        self.unsent: set[int] = set()
        """Probes the host's own stack refused to send (a port-unreachable came back for
        an earlier one): they never left."""
        self._stop = threading.Event()
        self._stop_sending = threading.Event()
        self._socks = [self._socket()]
        self._threads = [
            threading.Thread(target=self._send, name="kvmlab-netprobe-tx", daemon=True),
            threading.Thread(target=self._receive, name="kvmlab-netprobe-rx", daemon=True),
        ]

    def add_target(self, host: str, port: int) -> None:
        """Probe ``(host, port)`` too, from a socket of its own (a connected UDP socket
        keeps the source address it first took, loopback, which another host cannot
        answer)."""
        sock = self._socket()
        try:
            sock.connect((host, port))
        except OSError:
            sock.close()
            raise
        self._socks = [*self._socks, sock]

    def _socket(self) -> socket.socket:
        sock = self._make_socket()  # the host's network, or a namespace's (a path probe)
        sock.setblocking(False)  # select says readable; a datagram dropped since never blocks
        return sock

    def start(self) -> NetworkProbe:
        """Begin probing."""
        self._socks[0].connect(self.target)
        for thread in self._threads:
            thread.start()
        return self

    def stop_sending(self) -> None:
        """Send no more probes; echoes still on their way are counted until :meth:`stop`."""
        self._stop_sending.set()
        if self._threads[0].is_alive():
            self._threads[0].join(2.0)

    def stop(self) -> None:
        """Stop probing (waits for both threads) and close the sockets."""
        self._stop_sending.set()
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(2.0)
        for sock in self._socks:
            sock.close()

    def _send(self) -> None:
        period = 1.0 / RATE_HZ
        due = time.monotonic()
        while not self._stop_sending.is_set():
            now = time.monotonic()
            self.sent.append(now)
            seq = len(self.sent) - 1
            packet = _PACKET.pack(seq, now)
            refused = 0
            for sock in self._socks:
                # refused while no QEMU holds the forward (the switch-over): the loss it is
                try:
                    sock.send(packet)
                except OSError:
                    refused += 1
            if refused == len(self._socks):
                self.unsent.add(seq)
            due += period
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:  # behind (a loaded host): keep the rate from here, do not burst
                due = time.monotonic()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select(self._socks, [], [], 0.05)
            except (OSError, ValueError):  # a socket closed by stop()
                continue
            for sock in ready:
                try:
                    data = sock.recv(64)
                except OSError:  # the port was refused (no forward there yet), or closed
                    continue
                if len(data) == _PACKET.size:
                    seq, _ = _PACKET.unpack(data)
                    self.echoed.add(seq)
                    self.arrivals.append(time.monotonic())

    @property
    def echoes(self) -> int:
        """How many probes came back (each counted once)."""
        return len(self.echoed)

    def loss(self, since: float, until: float) -> Loss:
        """Probes sent in [since, until] and how many of them were never echoed."""
        window = [i for i, t in enumerate(list(self.sent)) if since <= t <= until]
        return Loss(len(window), sum(1 for i in window if i not in self.echoed))


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port on ``host`` nothing holds now (the forward takes it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port
