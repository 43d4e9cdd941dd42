"""The guest backends by name: the registry, the one place a backend is registered.

Each backend is one :class:`~kvmlab.runtime.machine.BackendKind` (its name, the machine
class that runs its guests, how a command makes it, its migration transport), defined in
its own package and registered here by one line: ``qemu`` (kvmlab's own QEMU process,
:mod:`kvmlab.runtime.qemu`), ``libvirt`` (a domain of a libvirtd, local or remote,
:mod:`kvmlab.runtime.libvirt`, whose library is imported only where one of its guests
is). Everything that acts on a recorded guest asks here which class runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.errors import StateError, printable
from kvmlab.runtime.libvirt.kind import KIND as LIBVIRT
from kvmlab.runtime.machine import Backend, BackendKind, Machine, ManagedVm
from kvmlab.runtime.qemu.backend import QEMU as QEMU
from kvmlab.runtime.qemu.kind import KIND as QEMU_KIND
from kvmlab.runtime.records import GuestRecord, invalid

if TYPE_CHECKING:
    from kvmlab.runtime.machine import BackendChoice
    from kvmlab.spec import LoadedLab

_KINDS: dict[str, BackendKind] = {}


def register(kind: BackendKind) -> BackendKind:
    """Make ``kind`` one of kvmlab's backends (its name on records and ``--backend``)."""
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Forget a backend registered for a while (a test's)."""
    _KINDS.pop(name, None)


register(QEMU_KIND)
register(LIBVIRT)


def names() -> tuple[str, ...]:
    """Every registered backend's name, in the order they were registered."""
    return tuple(_KINDS)


def kind(name: str) -> BackendKind:
    """The backend called ``name``; :class:`StateError` naming the ones there are."""
    found = _KINDS.get(name)
    if found is None:
        raise StateError(
            f"unknown guest backend {name!r} on record (kvmlab knows {', '.join(_KINDS)})"
        )
    return found


def kind_of(record: GuestRecord, run_dir: Path) -> BackendKind:
    """The backend a record names; a record naming none kvmlab has is not a valid record
    (``ps`` and ``down`` treat it as unreadable, its QEMU found by its run directory)."""
    found = _KINDS.get(record.backend) if isinstance(record.backend, str) else None
    if found is None:
        shown = printable(str(record.backend))
        raise invalid(run_dir, f"it names no backend kvmlab has ({shown})")
    return found


def machine_class(backend: str) -> type[Machine]:
    """The :class:`Machine` subclass that runs a guest of ``backend``."""
    return kind(backend).machine()


def attach(run_dir: Path, record: GuestRecord) -> Machine:
    """A machine for a guest another kvmlab command started (for exec, down, exits)."""
    return machine_class(record.backend).from_record(run_dir, record)


def running(record: GuestRecord, run_dir: Path) -> bool:
    """Whether the guest of ``record`` still runs, as its backend tells (its QEMU, checked
    against its run directory; a libvirt domain on another host: what libvirt says)."""
    return kind_of(record, run_dir).machine().running_on_record(record, run_dir)


def process_here(record: GuestRecord) -> bool:
    """Whether the guest's process is on this host, to be looked at by its pid (not for a
    guest inside another, nor for a domain of a libvirtd elsewhere)."""
    return record.via is None and machine_class(record.backend).process_here(record)


def make(name: str, loaded: LoadedLab, given: BackendChoice) -> Backend:
    """The backend ``name`` for a lab and a command's options."""
    return kind(name).make(loaded, given)


def managed_guest_busy_ms(vm: ManagedVm) -> float | None:
    """``vm``'s busy guest CPU time (ms) from its guest agent, through the backends whose
    managers run VMs; None when no agent answers."""
    for kind_ in _KINDS.values():
        if kind_.managed is not None and kind_.guest_busy_ms is not None:
            busy = kind_.guest_busy_ms(vm)
            if busy is not None:
                return busy
    return None


def managed_vms() -> list[ManagedVm]:
    """The VMs other managers run on this host, as every backend that knows of some
    proves them (a libvirt daemon's domains)."""
    out: list[ManagedVm] = []
    for kind_ in _KINDS.values():
        if kind_.managed is not None:
            out.extend(kind_.managed())
    return out
