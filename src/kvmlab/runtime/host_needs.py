"""What a lab's guests take from this host that kvmlab does not make, checked before
anything starts (QEMU would otherwise fail at start, after the lab's networks exist): the
socket of a switch of the user's own (a vhost-user NIC's ``socket`` in client mode), and
free huge pages for guest RAM (``backing = "hugepages"``; kvmlab reserves pages only for
its own switch, never a guest's)."""

from __future__ import annotations

import stat
from collections.abc import Sequence
from pathlib import Path

from kvmlab.errors import HostError
from kvmlab.spec.lab import Lab

HUGEPAGES = Path("/sys/kernel/mm/hugepages")
PAGE_BYTES = {"2M": 2 << 20, "1G": 1 << 30}


def check_external_sockets(lab_file: str, lab_dir: Path, lab: Lab, guests: Sequence[str]) -> None:
    """Refuse (:class:`HostError`) a client-mode vhost-user NIC whose switch socket is not
    there: nothing serves it yet."""
    for name in guests:
        for i, nic in enumerate(lab.guests[name].nics):
            socket = getattr(nic, "socket", None)
            if nic.type != "vhost-user" or socket is None or getattr(nic, "mode", "") != "client":
                continue
            path = Path(socket) if Path(socket).is_absolute() else lab_dir / socket
            try:
                is_socket = stat.S_ISSOCK(path.stat().st_mode)
            except OSError:
                is_socket = False
            if not is_socket:
                raise HostError(
                    f"{lab_file}: guests.{name}.nics[{i}].socket: nothing serves {path} (no "
                    "socket there): start your switch first (e.g. dpdk-testpmd --vdev "
                    f"'net_vhost0,iface={path}'), or give the NIC port = NAME of the lab's "
                    "[switch], which kvmlab starts"
                )


def check_guest_hugepages(
    lab_file: str, lab: Lab, guests: Sequence[str], root: Path = HUGEPAGES
) -> None:
    """Refuse (:class:`HostError`, with the command) guests whose RAM needs more free huge
    pages of a size than this host has."""
    need: dict[str, int] = {}
    for name in guests:
        memory = lab.guests[name].memory
        if memory.backing == "hugepages":
            pages = -(-int(memory.size) // PAGE_BYTES[memory.hugepage_size])
            need[memory.hugepage_size] = need.get(memory.hugepage_size, 0) + pages
    for size, pages in sorted(need.items()):
        pool = root / f"hugepages-{PAGE_BYTES[size] >> 10}kB"
        try:
            total = int((pool / "nr_hugepages").read_text().split()[0])
            free = int((pool / "free_hugepages").read_text().split()[0])
            free -= int((pool / "resv_hugepages").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            raise HostError(
                f"{lab_file}: guest RAM needs {pages} huge pages of {size}, and this kernel "
                f"offers none of that size ({pool} is missing)"
            ) from None
        if free < pages:
            raise HostError(
                f"{lab_file}: guest RAM needs {pages} free huge pages of {size} ({free} "
                f"free): reserve them (echo {total + pages - max(free, 0)} > "
                f"{pool}/nr_hugepages), then kvmlab up again",
            )
