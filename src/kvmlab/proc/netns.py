"""Sockets in another network namespace: a process's, or a named one.

A namespace made by ``unshare --net`` for one process has no name under /run/netns and
goes when that process exits: nothing to record, nothing a crash can leave behind. kvmlab
reaches into it by the process's ``/proc/PID/ns/net``: a short-lived thread enters it
(``setns`` moves only the calling thread), makes the socket, and ends; a socket keeps the
namespace it was made in.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

CLONE_NEWNET = 0x40000000


def socket_in(
    pid: int, family: int = socket.AF_INET, kind: int = socket.SOCK_DGRAM
) -> socket.socket:
    """A new socket in the network namespace of process ``pid`` (:class:`OSError` when that
    namespace cannot be entered: the process is gone, or this is not root)."""
    return socket_at(f"/proc/{pid}/ns/net", family, kind)


def socket_at(
    namespace: str, family: int = socket.AF_INET, kind: int = socket.SOCK_DGRAM
) -> socket.socket:
    """A new socket in the network namespace at path ``namespace`` (``/proc/PID/ns/net``,
    or a named one's ``/run/netns/NAME``)."""
    made: list[socket.socket] = []
    failed: list[OSError] = []

    def enter_and_make() -> None:
        try:
            fd = os.open(namespace, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            failed.append(exc)
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                failed.append(OSError(errno, f"setns into {namespace}: {os.strerror(errno)}"))
                return
            made.append(socket.socket(family, kind))
        except OSError as exc:
            failed.append(exc)
        finally:
            os.close(fd)

    thread = threading.Thread(target=enter_and_make, name="kvmlab-netns", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0]
