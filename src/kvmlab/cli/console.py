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
    sel = selectors.DefaultSelector()
    try:
        sel.register(stdin, selectors.EVENT_READ)
        sel.unregister(stdin)
        polled = True
    except PermissionError:  # a regular file or /dev/null: always readable
        polled = False
    except (OSError, ValueError):  # stdin closed
        polled, stdin = False, -1
    stdin_open = stdin >= 0
    pending = b""  # read from stdin, not yet taken by the console
    last = time.monotonic()  # when bytes last moved either way
    sel.register(sock, selectors.EVENT_READ)
    watching_stdin = False
    try:
        while True:
            want_stdin = stdin_open and len(pending) < _BACKLOG
            if polled and want_stdin != watching_stdin:
                if want_stdin:
                    sel.register(stdin, selectors.EVENT_READ)
                else:
                    sel.unregister(stdin)
                watching_stdin = want_stdin
            sock_events = selectors.EVENT_READ | (selectors.EVENT_WRITE if pending else 0)
            sel.modify(sock, sock_events)
            if want_stdin and not polled:
                timeout: float | None = 0.0
            elif stdin_open:
                timeout = None
            else:
                timeout = max(0.0, quiet - (time.monotonic() - last))
            stdin_ready = not polled
            for key, mask in sel.select(timeout):
                if key.fileobj is not sock:
                    stdin_ready = True
                    continue
                if mask & selectors.EVENT_READ:
                    data = sock.recv(65536)
                    if not data:
                        return  # QEMU closed the console
                    if not _write_all(stdout, data):
                        return  # nobody reads our output any more
                    last = time.monotonic()
                if mask & selectors.EVENT_WRITE and pending:
                    try:
                        sent = sock.send(pending)
                    except OSError:
                        return  # QEMU closed the console
                    pending = pending[sent:]
                    last = time.monotonic()
            if want_stdin and stdin_ready:
                data = os.read(stdin, 65536)
                if not data:
                    stdin_open = False
                    last = time.monotonic()
                    if watching_stdin:
                        sel.unregister(stdin)
                        watching_stdin = False
                elif is_tty and DETACH in data:
                    return
                else:
                    pending += data
            if not stdin_open and time.monotonic() - last >= quiet:
                return  # stdin ended and the guest has been quiet
    finally:
        sel.close()


def _write_all(fd: int, data: bytes) -> bool:
    """Write everything (a pipe takes part of it at a time); False if the reader left."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        return False
    return True
