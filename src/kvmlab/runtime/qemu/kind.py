"""The qemu backend's record in the registry (:mod:`kvmlab.runtime.backends`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.errors import UsageError
from kvmlab.runtime.machine import Backend, BackendChoice, BackendKind, Machine

if TYPE_CHECKING:
    from kvmlab.spec import LoadedLab


def _machine() -> type[Machine]:
    from kvmlab.runtime.qemu.machine import QemuMachine

    return QemuMachine


def make(loaded: LoadedLab, given: BackendChoice) -> Backend:
    """kvmlab's own QEMU; the options of a daemon (``--connect``, ...) are refused."""
    from kvmlab.runtime.qemu.backend import QEMU

    if given.connect is not None and given.backend is None:
        raise UsageError(
            f"--connect: {loaded.path} runs on the qemu backend; add --backend libvirt "
            '(or backend = "libvirt" in the lab)'
        )
    if given.connect is not None or given.persistent is not None or given.as_root is not None:
        raise UsageError("--connect, --persistent and --qemu-as-root need --backend libvirt")
    named = [n for n, g in loaded.lab.guests.items() if g.libvirt_uri]
    if named:
        raise UsageError(
            f"{loaded.path}: guests.{named[0]}.libvirt_uri names a libvirt "
            "daemon, but the lab runs on the qemu backend (add --backend "
            'libvirt, or backend = "libvirt" in the lab)'
        )
    return QEMU


KIND = BackendKind(
    name="qemu",
    machine=_machine,
    make=make,
    transport="kvmlab.migrate.transports.qmp:QmpTransport",
)
