"""A serial console on the terminal: raw mode in, guest output out, Ctrl-] detaches.

Stdin may also be a pipe, a file or /dev/null: its bytes go to the console, and once it
has ended the console detaches when the guest has been quiet for a second. Regular files
and /dev/null cannot be polled (epoll refuses them); they are always readable, so they are
read directly. Input waits while the guest does not take it, so guest output keeps flowing.
"""

from __future__ import annotations

import os
import selectors
import socket
import sys
import termios
import time
import tty
from pathlib import Path

DETACH = b"\x1d"  # Ctrl-]
QUIET = 1.0  # seconds of silence after stdin ended before detaching
_BACKLOG = 1 << 16  # stdin bytes held while the console does not take them
CONNECTED = "connected to the serial console; the end of stdin detaches once the guest is quiet"
"""Said on stderr when stdin is not a terminal: a script waits for it before it makes the
guest talk (QEMU drops console output while no client is attached)."""


def attach(path: Path, stdin: int = 0, stdout: int = 1, quiet: float = QUIET) -> None:
    """Pump bytes between ``stdin``/``stdout`` and the console socket until detach or EOF."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    attach_socket(sock, stdin, stdout, quiet)


def attach_socket(
    sock: socket.socket, stdin: int = 0, stdout: int = 1, quiet: float = QUIET
) -> None:
    """:func:`attach` to a connected socket (closed when this returns)."""
    sock.setblocking(False)
    is_tty = os.isatty(stdin)
    saved = termios.tcgetattr(stdin) if is_tty else None
    if is_tty:
        print("connected to the serial console; Ctrl-] detaches\r", file=sys.stderr)
        tty.setraw(stdin)
    else:
        print(CONNECTED, file=sys.stderr, flush=True)
    try:
        _pump(sock, stdin, stdout, is_tty, quiet)
    finally:
        sock.close()
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
            print("\ndetached", file=sys.stderr)


def _pump(sock: socket.socket, stdin: int, stdout: int, is_tty: bool, quiet: float) -> None:
    _Pump(sock, stdin, stdout, is_tty, quiet).run()


class _Pump:
    """Bytes between the console socket and stdin/stdout until the console closes, the
    reader leaves, Ctrl-] on a terminal, or stdin ended and the guest has been quiet for
    ``quiet`` seconds."""

    def __init__(
        self, sock: socket.socket, stdin: int, stdout: int, is_tty: bool, quiet: float
    ) -> None:
        self.sel = selectors.DefaultSelector()
        try:
            self.sel.register(stdin, selectors.EVENT_READ)
            self.sel.unregister(stdin)
            self.polled = True
        except PermissionError:  # a regular file or /dev/null: always readable
            self.polled = False
        except (OSError, ValueError):  # stdin closed
            self.polled, stdin = False, -1
        self.sock, self.stdin, self.stdout = sock, stdin, stdout
        self.is_tty, self.quiet = is_tty, quiet
        self.stdin_open = stdin >= 0
        self.pending = b""  # read from stdin, not yet taken by the console
        self.last = time.monotonic()  # when bytes last moved either way
        self.watching_stdin = False

    def run(self) -> None:
        self.sel.register(self.sock, selectors.EVENT_READ)
        try:
            while self._turn():
                pass
        finally:
            self.sel.close()

    def _turn(self) -> bool:
        """One wait and what it found; False when the pump ends."""
        want_stdin = self.stdin_open and len(self.pending) < _BACKLOG
        if self.polled and want_stdin != self.watching_stdin:
            if want_stdin:
                self.sel.register(self.stdin, selectors.EVENT_READ)
            else:
                self.sel.unregister(self.stdin)
            self.watching_stdin = want_stdin
        sock_events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.pending else 0)
        self.sel.modify(self.sock, sock_events)
        stdin_ready = not self.polled
        for key, mask in self.sel.select(self._timeout(want_stdin)):
            if key.fileobj is not self.sock:
                stdin_ready = True
                continue
            if not self._socket(mask):
                return False
        if want_stdin and stdin_ready and not self._read_stdin():
            return False
        # stdin ended and the guest has been quiet: done
        return self.stdin_open or time.monotonic() - self.last < self.quiet

    def _timeout(self, want_stdin: bool) -> float | None:
        if want_stdin and not self.polled:
            return 0.0
        if self.stdin_open:
            return None
        return max(0.0, self.quiet - (time.monotonic() - self.last))

    def _socket(self, mask: int) -> bool:
        """The console's output to stdout, pending input to the console; False when
        QEMU closed the console or nobody reads our output any more."""
        if mask & selectors.EVENT_READ:
            data = self.sock.recv(65536)
            if not data:
                return False  # QEMU closed the console
            if not _write_all(self.stdout, data):
                return False  # nobody reads our output any more
            self.last = time.monotonic()
        if mask & selectors.EVENT_WRITE and self.pending:
            try:
                sent = self.sock.send(self.pending)
            except OSError:
                return False  # QEMU closed the console
            self.pending = self.pending[sent:]
            self.last = time.monotonic()
        return True

    def _read_stdin(self) -> bool:
        """Read what stdin has; False on Ctrl-] at a terminal."""
        data = os.read(self.stdin, 65536)
        if not data:
            self.stdin_open = False
            self.last = time.monotonic()
            if self.watching_stdin:
                self.sel.unregister(self.stdin)
                self.watching_stdin = False
        elif self.is_tty and DETACH in data:
            return False
        else:
            self.pending += data
        return True


def _write_all(fd: int, data: bytes) -> bool:
    """Write everything (a pipe takes part of it at a time); False if the reader left."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        return False
    return True
