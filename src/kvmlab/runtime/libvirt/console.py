"""A libvirt guest's serial console as a socket: ``virDomainOpenConsole``'s stream bridged
to one end of a socket pair by two threads, so ``kvmlab console`` pumps it like the qemu
backend's console socket, locally or on a remote daemon.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import libvirt

from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe

CHUNK = 65536


def console_socket(conn: Any, dom: Any, uri: str, guest: str) -> socket.socket:
    """The console's bytes on a socket; closing it ends the libvirt stream. A console
    another client holds is refused (never taken over)."""
    stream = conn.newStream(0)
    try:
        dom.openConsole(None, stream, libvirt.VIR_DOMAIN_CONSOLE_SAFE)
    except libvirt.libvirtError as exc:
        with contextlib.suppress(libvirt.libvirtError):
            stream.abort()
        raise LibvirtFailure(
            f"cannot open the serial console: {describe(exc)}",
            uri,
            guest,
            ["if another 'kvmlab console' or 'virsh console' holds it: detach that one first"],
        ) from None
    ours, bridged = socket.socketpair()
    done = threading.Event()

    def finish() -> None:
        # No virStreamAbort here: the other pump may be inside recv or send on the stream.
        # The daemon frees the console when the stream ends or the connection closes (the
        # command's exit).
        if not done.is_set():
            done.set()
            with contextlib.suppress(OSError):
                bridged.shutdown(socket.SHUT_RDWR)

    def from_guest() -> None:
        try:
            while not done.is_set():
                data = stream.recv(CHUNK)
                if not isinstance(data, bytes) or not data:
                    break  # -2 never comes (blocking stream); b"": the console closed
                bridged.sendall(data)
        except (libvirt.libvirtError, OSError):
            pass
        finish()

    def to_guest() -> None:
        try:
            while not done.is_set():
                data = bridged.recv(CHUNK)
                if not data:
                    break  # our end was closed: detach
                view = memoryview(data)
                while view:
                    view = view[stream.send(bytes(view)) :]
        except (libvirt.libvirtError, OSError):
            pass
        finish()

    for pump in (from_guest, to_guest):
        threading.Thread(target=pump, name=f"console-{pump.__name__}", daemon=True).start()
    return ours
