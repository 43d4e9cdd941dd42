"""A process's TCP connections, read from /proc, and closing one from outside (``ss -K``).

For a job that hangs on a peer that is gone: a QEMU whose block mirror waits for replies
on a connection whose other end vanished while the link was down never hears of it (it has
nothing to send, so TCP never finds out), and libvirt's cancel waits for that mirror.
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

ESTABLISHED = "01"


@dataclass(frozen=True)
class Connection:
    """One established TCP connection: this end and the peer."""

    local: str
    local_port: int
    remote: str
    remote_port: int


def _address(field: str) -> tuple[str, int]:
    """``/proc/net/tcp``'s ``HEXADDR:HEXPORT`` (the address in host byte order, by 32-bit
    words) as an address and a port."""
    hex_addr, hex_port = field.split(":")
    raw = bytes.fromhex(hex_addr)
    words = b"".join(struct.pack("=I", w) for w in struct.unpack(f">{len(raw) // 4}I", raw))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    address = ipaddress.ip_address(socket.inet_ntop(family, words))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address), int(hex_port, 16)


def parse_tcp_table(text: str, inodes: set[str]) -> list[Connection]:
    """The established connections of ``/proc/net/tcp`` or ``tcp6`` text whose socket
    inode is among ``inodes``."""
    found = []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 10 or cols[3] != ESTABLISHED or cols[9] not in inodes:
            continue
        (local, lport), (remote, rport) = _address(cols[1]), _address(cols[2])
        found.append(Connection(local, lport, remote, rport))
    return found


def tcp_connections(pid: int) -> list[Connection]:
    """The established TCP connections process ``pid`` holds (none when it is gone or
    cannot be read)."""
    inodes = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return []
    for fd in fds:
        try:
            target = str(fd.readlink())
        except OSError:  # closed meanwhile (the listing's own descriptor is)
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        try:
            text = Path(f"/proc/{pid}/net/{table}").read_text()
        except OSError:
            continue
        found += parse_tcp_table(text, inodes)
    return found


def close_connection(conn: Connection) -> bool:
    """Close one connection from outside (``ss -K``: the kernel's socket destroy, which the
    holder sees as an error on it); whether ``ss`` did it."""
    ss = shutil.which("ss")
    if ss is None:
        return False
    argv = [ss, "-K", "src", conn.local, "dst", conn.remote]
    argv += ["sport", "=", f":{conn.local_port}", "dport", "=", f":{conn.remote_port}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    return done.returncode == 0 and conn.remote in done.stdout
