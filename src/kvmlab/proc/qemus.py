"""Every QEMU on this host, whoever started it: read from ``/proc`` only, never signalled.

What a process is comes from what it runs and holds, not from what it is called: a QEMU is
a process whose program is ``qemu-system-*`` (directly or after a wrapper's ``--``); it
runs under KVM when it holds a KVM VM file (``anon_inode:kvm-vm``), whatever its command
line asked for; its name is its ``-name`` (libvirt's ``guest=NAME,...`` form too).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from kvmlab.proc.processes import QEMU, argv_of, cpu_seconds, program_args, start_time

KVM_VM = "anon_inode:kvm-vm"
"""What ``/proc/PID/fd/N`` reads for the file of a VM KVM runs."""


@dataclass(frozen=True)
class QemuProcess:
    """One QEMU process as ``/proc`` shows it."""

    pid: int
    uid: int
    start: int
    """Start time in clock ticks since boot: with the pid, it names this process for good."""
    argv: tuple[str, ...]
    """QEMU's own words (after any wrapper), its binary first."""
    name: str | None
    accel: str
    """What it runs under: ``kvm`` when it holds a KVM VM, else what it asked for
    (``tcg`` by default; ``unknown`` when its files cannot be read)."""
    cpu_seconds: float

    @property
    def user(self) -> str:
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return str(self.uid)

    def option(self, name: str) -> str | None:
        """The value of QEMU option ``-name`` (or ``--name``), the last one given."""
        return option_value(list(self.argv), name)


def option_value(argv: list[str], name: str) -> str | None:
    """The value after the last ``-NAME``/``--NAME`` in ``argv``, or None."""
    found = None
    for i, word in enumerate(argv[:-1]):
        if word in (f"-{name}", f"--{name}"):
            found = argv[i + 1]
    return found


def _options(value: str) -> list[str]:
    """QEMU's comma-separated option list, ``,,`` being a literal comma."""
    parts: list[str] = []
    current = ""
    i = 0
    while i < len(value):
        if value[i] == ",":
            if value[i + 1 : i + 2] == ",":
                current += ","
                i += 2
                continue
            parts.append(current)
            current = ""
        else:
            current += value[i]
        i += 1
    parts.append(current)
    return parts


def name_of(argv: list[str]) -> str | None:
    """The guest's name from ``-name NAME[,...]`` or libvirt's ``-name guest=NAME,...``."""
    value = option_value(argv, "name")
    if value is None:
        return None
    for part in _options(value):
        if part.startswith("guest="):
            return part[len("guest=") :] or None
    first = _options(value)[0]
    return None if "=" in first else first or None


def asked_accel(argv: list[str]) -> str:
    """The accelerator the command line asks for first: ``-enable-kvm``, ``-accel X``,
    ``-machine ...,accel=X[:Y]``; ``tcg`` when it names none (QEMU's default)."""
    for i, word in enumerate(argv):
        if word in ("-enable-kvm", "--enable-kvm"):
            return "kvm"
        if word in ("-accel", "--accel") and i + 1 < len(argv):
            first = _options(argv[i + 1])[0]
            return first.removeprefix("accel=") or "tcg"
        if word in ("-machine", "--machine", "-M") and i + 1 < len(argv):
            for part in _options(argv[i + 1]):
                if part.startswith("accel="):
                    return part[len("accel=") :].split(":")[0] or "tcg"
    return "tcg"


def holds_kvm_vm(pid: int, fd_dir: Path | None = None) -> bool | None:
    """Whether ``pid`` holds a KVM VM file; None when its files cannot be read."""
    where = fd_dir or Path(f"/proc/{pid}/fd")
    try:
        entries = list(os.scandir(where))
    except OSError:
        return None
    for entry in entries:
        try:
            if str(Path(entry.path).readlink()) == KVM_VM:
                return True
        except OSError:
            continue
    return False


def qemu_process(pid: int) -> QemuProcess | None:
    """``pid`` as a QEMU process, or None when it is gone or runs no QEMU."""
    argv = argv_of(pid)
    own = program_args(argv, QEMU) if argv else None
    started = start_time(pid)
    if own is None or started is None:
        return None
    try:
        uid = Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return None
    kvm = holds_kvm_vm(pid)
    accel = "kvm" if kvm else ("unknown" if kvm is None else asked_accel(own))
    if accel == "kvm" and kvm is False:
        accel = "tcg"
    return QemuProcess(pid, uid, started, tuple(own), name_of(own), accel, cpu_seconds(pid) or 0.0)


def qemu_processes() -> list[QemuProcess]:
    """Every QEMU process on this host (this pid namespace), by pid."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            found = qemu_process(int(entry.name))
            if found is not None:
                out.append(found)
    return sorted(out, key=lambda q: q.pid)
