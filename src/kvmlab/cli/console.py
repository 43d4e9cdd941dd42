"""A serial console on the terminal: raw mode in, guest output out, Ctrl-] detaches."""

from __future__ import annotations

import os
import selectors
import socket
import sys
import termios
import tty
from pathlib import Path

DETACH = b"\x1d"  # Ctrl-]


def attach(path: Path) -> None:
    """Pump bytes between the terminal and the console socket until detach or EOF."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    stdin = sys.stdin.fileno()
    is_tty = os.isatty(stdin)
    saved = termios.tcgetattr(stdin) if is_tty else None
    if is_tty:
        print("connected to the serial console; Ctrl-] detaches\r", file=sys.stderr)
        tty.setraw(stdin)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(stdin, selectors.EVENT_READ)
    stdin_open = True
    try:
        while True:
            events = sel.select(timeout=None if stdin_open else 1.0)
            if not events:
                return  # stdin (a pipe) ended and the guest has been quiet for a second
            for key, _ in events:
                if key.fileobj is sock:
                    data = sock.recv(65536)
                    if not data:
                        return
                    os.write(sys.stdout.fileno(), data)
                else:
                    data = os.read(stdin, 4096)
                    if not data:
                        sel.unregister(stdin)
                        stdin_open = False
                        continue
                    if is_tty and DETACH in data:
                        return
                    sock.sendall(data)
    finally:
        sel.close()
        sock.close()
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
            print("\ndetached", file=sys.stderr)
