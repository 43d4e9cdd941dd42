"""A guest's run directory handed from a migration's source QEMU to its destination.

The destination QEMU runs with its own run directory, ``LAB/GUEST/.migration-N`` (a name
no guest can have, so ``ps`` does not list it as a guest; its command line still names
the guest's directory, so ``ps`` and ``down`` find it if kvmlab dies). When the migration
has completed and the source has quit, the destination's sockets and logs are moved into
the guest's directory (a bound unix socket keeps working under its new name) and the
guest's record names the destination's pid: ``exec``, ``console``, ``ps`` and ``down``
reach the migrated guest at the same address.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from kvmlab.errors import KvmlabError
from kvmlab.proc.confined import remove_owned
from kvmlab.proc.processes import find_marked
from kvmlab.render.runfiles import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    PROBE_LOG,
    QMP_SOCKET,
    SERIAL_LOG,
)
from kvmlab.runtime.rundir import GuestRecord

MOVED = (QMP_SOCKET, AGENT_SOCKET, CONSOLE_SOCKET, "qemu.pid")
LOGS = (SERIAL_LOG, PROBE_LOG, "qemu.log")
INCOMING_FLAG = "-incoming"


def migration_dir(guest_dir: Path, record: GuestRecord) -> Path:
    """Where the next destination QEMU of this guest keeps its run files."""
    return guest_dir / f".migration-{record.migrations + 1}"


def destination_argv(
    argv: list[str], guest_dir: Path, dest_dir: Path, qemu: str | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """The destination's command line: the source's with its run files in ``dest_dir``,
    host port forwards removed (the source holds the ports until it quits) and
    ``-incoming defer``; and the forwards removed, as (netdev id, hostfwd rule).

    ``qemu`` replaces the QEMU binary (migrating to another QEMU version).
    """
    old, new = f"{guest_dir}/", f"{dest_dir}/"
    out: list[str] = []
    forwards: list[tuple[str, str]] = []
    previous = ""
    for arg in argv:
        arg = arg.replace(old, new)
        if previous == "-netdev" and arg.startswith("user,"):
            parts = arg.split(",")
            netdev = next((p[3:] for p in parts if p.startswith("id=")), "")
            forwards += [(netdev, p[len("hostfwd=") :]) for p in parts if p.startswith("hostfwd=")]
            arg = ",".join(p for p in parts if not p.startswith("hostfwd="))
        out.append(arg)
        previous = arg
    if qemu is not None:
        for i, arg in enumerate(out):
            if Path(arg).name.startswith("qemu-system"):
                out[i] = qemu
                break
    return [*out, INCOMING_FLAG, "defer"], forwards


def option(parts: list[str], key: str) -> str:
    """The value of ``key=`` among a QEMU option string's comma-separated parts ("" if
    absent)."""
    return next((p[len(key) + 1 :] for p in parts if p.startswith(f"{key}=")), "")


def with_option(parts: list[str], key: str, value: str) -> str:
    """The option string with ``key=`` set to ``value`` (where it was)."""
    return ",".join(f"{key}={value}" if p.startswith(f"{key}=") else p for p in parts)


def shared_server_sockets(argv: list[str], guest_dir: Path) -> list[str]:
    """Unix sockets the QEMU of ``argv`` listens on outside its guest's directory (a
    vhost-user NIC on an OVS-DPDK port: OVS connects to QEMU there). A destination QEMU
    would bind the same name and wait for a peer that stays with the source."""
    out = []
    previous = ""
    for arg in argv:
        if previous == "-chardev" and arg.startswith("socket,"):
            fields = dict(p.split("=", 1) for p in arg.split(",")[1:] if "=" in p)
            path = fields.get("path")
            if path and fields.get("server") == "on" and not path.startswith(f"{guest_dir}/"):
                out.append(path)
        previous = arg
    return out


def adopt(
    guest_dir: Path, dest_dir: Path, record: GuestRecord, pid: int, pid_start: int | None
) -> GuestRecord:
    """Move the destination's sockets and logs into the guest's directory and record it.

    Call once the source QEMU has exited. The source's logs are kept as ``NAME.source``.
    The previous destination directory (of an earlier migration) is removed.
    """
    for name in LOGS:
        if (guest_dir / name).exists():
            (guest_dir / name).replace(guest_dir / f"{name}.source")
    for name in (*MOVED, *LOGS):
        if (dest_dir / name).exists():
            (dest_dir / name).replace(guest_dir / name)
    adopted = replace(
        record,
        pid=pid,
        pid_start=pid_start,
        state="running",
        owner=None,
        owner_start=None,
        migrations=record.migrations + 1,
    )
    adopted.save(guest_dir)
    if record.migrations:  # best effort: the guest is handed over whatever happens here
        earlier = guest_dir / f".migration-{record.migrations}"
        if earlier.is_dir() and not find_marked(f"{earlier}/"):
            with contextlib.suppress(OSError, KvmlabError):
                remove_owned(earlier)
    return adopted
