"""Host ports a lab forwards: checked free before any guest starts, the holder named if not."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from ipaddress import IPv4Address
from pathlib import Path

from kvmlab.errors import HostError
from kvmlab.spec import Guest, UserNic
from kvmlab.spec.rules import guest_key


def forwards(
    guests: list[tuple[tuple[str, ...], Guest]],
) -> Iterator[tuple[str, str, IPv4Address, int]]:
    """``(lab key, proto, host address, host port)`` of every forward of these guests."""
    for path, guest in guests:
        for i, nic in enumerate(guest.nics):
            if isinstance(nic, UserNic):
                for j, fwd in enumerate(nic.forwards):
                    key = f"{guest_key(path)}.nics[{i}].forwards[{j}]"
                    yield key, fwd.proto, fwd.host_addr, fwd.host_port


def _socket_inodes(proto: str, port: int) -> set[int]:
    """Inodes of sockets bound to ``port`` (any address) in /proc/net/{tcp,udp}{,6}."""
    inodes = set()
    for table in (f"/proc/net/{proto}", f"/proc/net/{proto}6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if len(cols) > 9 and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(int(cols[9]))
    return inodes


def holders(proto: str, port: int) -> list[str]:
    """``pid (command)`` of the processes holding ``port`` (as far as /proc lets us see)."""
    wanted = {f"socket:[{inode}]" for inode in _socket_inodes(proto, port)}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not wanted:
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                if str(fd.readlink()) in wanted:
                    cmd = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                    found.append(f"pid {proc.name} ({cmd})")
                    break
    return found


def check_free(lab_file: str, guests: list[tuple[tuple[str, ...], Guest]]) -> None:
    """Raise :class:`HostError` for the first forwarded host port that cannot be bound."""
    for key, proto, addr, port in forwards(guests):
        kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
        with socket.socket(socket.AF_INET, kind) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((str(addr), port))
            except OSError as exc:
                who = holders(proto, port)
                by = f" by {', '.join(who)}" if who else ""
                raise HostError(
                    f"{lab_file}: {key}: host port {addr}:{port}/{proto} is not free "
                    f"({exc.strerror}){by}",
                    [f"stop what holds it, or set another host_port in {lab_file}"],
                ) from None
