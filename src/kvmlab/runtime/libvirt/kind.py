"""The libvirt backend's record in the registry (:mod:`kvmlab.runtime.backends`); nothing
here imports libvirt-python until one of its guests is acted on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.runtime.machine import Backend, BackendChoice, BackendKind, Machine, ManagedVm

if TYPE_CHECKING:
    from kvmlab.spec import LoadedLab


def _machine() -> type[Machine]:
    from kvmlab.runtime.libvirt.machine import LibvirtMachine

    return LibvirtMachine


def make(loaded: LoadedLab, given: BackendChoice) -> Backend:
    """The libvirtd of ``--connect`` (else the lab's ``[libvirt] uri``) and any other a
    guest names; ``--persistent`` and ``--qemu-as-root`` over the lab's own settings."""
    from kvmlab.runtime.libvirt.backend import LibvirtBackend

    spec = loaded.lab.libvirt
    return LibvirtBackend(
        given.connect or spec.uri,
        spec.persistent if given.persistent is None else given.persistent,
        spec.qemu_as_root if given.as_root is None else given.as_root,
    )


def _managed() -> list[ManagedVm]:
    from kvmlab.runtime.libvirt.managed import managed_vms

    return managed_vms()


def _guest_busy_ms(vm: ManagedVm) -> float | None:
    from kvmlab.runtime.libvirt.managed import guest_busy_ms

    return guest_busy_ms(vm)


KIND = BackendKind(
    name="libvirt",
    machine=_machine,
    make=make,
    transport="kvmlab.migrate.transports.libvirt:LibvirtTransport",
    managed=_managed,
    guest_busy_ms=_guest_busy_ms,
)
