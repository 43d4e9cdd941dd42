"""The guest backends by name: the one place that maps a record to the class that runs it.

``qemu``: kvmlab's own QEMU process (:mod:`kvmlab.runtime.qemu.machine`); ``libvirt``: a
domain of a libvirtd, local or remote (:mod:`kvmlab.runtime.libvirt.machine`, imported only
when a record names it: libvirt-python is not needed otherwise).
"""

from __future__ import annotations

from pathlib import Path

from kvmlab.errors import StateError
from kvmlab.runtime.machine import Backend, Machine
from kvmlab.runtime.qemu.backend import QemuBackend
from kvmlab.runtime.qemu.machine import QemuMachine
from kvmlab.runtime.rundir import GuestRecord

BACKEND_NAMES = ("qemu", "libvirt")


def machine_class(backend: str) -> type[Machine]:
    """The :class:`Machine` subclass that runs a guest of ``backend``."""
    if backend == "qemu":
        return QemuMachine
    if backend == "libvirt":
        from kvmlab.runtime.libvirt.machine import LibvirtMachine

        return LibvirtMachine
    raise StateError(f"unknown guest backend {backend!r} on record (kvmlab knows qemu, libvirt)")


def attach(run_dir: Path, record: GuestRecord) -> Machine:
    """A machine for a guest another kvmlab command started (for exec, down, exits)."""
    return machine_class(record.backend).from_record(run_dir, record)


QEMU: Backend = QemuBackend()
"""kvmlab's own QEMU (the default backend; it holds nothing, so one serves every run)."""


def libvirt(uri: str, persistent: bool, qemu_as_root: bool) -> Backend:
    """A libvirtd at ``uri`` (and any other a guest names) runs the guests."""
    from kvmlab.runtime.libvirt.backend import LibvirtBackend

    return LibvirtBackend(uri, persistent, qemu_as_root)
