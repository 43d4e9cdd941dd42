"""``--backend``, ``--connect`` and ``--persistent``: which backend runs a lab's guests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.errors import UsageError
from kvmlab.spec import LoadedLab
from kvmlab.spec.backend import check_uri

if TYPE_CHECKING:
    from kvmlab.runtime.libvirt.lab import LibvirtBackend

BACKEND_HELP = "qemu (kvmlab runs QEMU) or libvirt (a libvirtd does); default: the lab's."
CONNECT_HELP = "libvirt URI for the libvirt backend (default: the lab's [libvirt] uri)."
PERSISTENT_HELP = "libvirt: define domains persistently (they are undefined by down)."


def choose_backend(loaded: LoadedLab, backend: str | None, connect: str | None,
                   persistent: bool | None) -> LibvirtBackend | None:  # fmt: skip
    """The libvirt backend the options and the lab ask for, or None for kvmlab's QEMU."""
    if backend not in (None, "qemu", "libvirt"):
        raise UsageError(f"--backend {backend!r}: choose qemu or libvirt")
    if connect is not None:
        try:
            check_uri(connect)
        except ValueError as exc:
            raise UsageError(f"--connect: {exc}") from None
    chosen = backend or ("libvirt" if connect else loaded.lab.backend)
    if chosen != "libvirt":
        if connect is not None or persistent is not None:
            raise UsageError("--connect and --persistent need --backend libvirt")
        return None
    from kvmlab.runtime.libvirt.lab import LibvirtBackend

    spec = loaded.lab.libvirt
    return LibvirtBackend(connect or spec.uri,
                          spec.persistent if persistent is None else persistent)


def qemu_only(loaded: LoadedLab, command: str) -> None:
    """Refuse a lab that asks for the libvirt backend in a command only the qemu one runs."""
    if loaded.lab.backend == "libvirt":
        raise UsageError(f"{loaded.path}: backend = \"libvirt\": 'kvmlab {command}' runs only "
                         "on the qemu backend so far (kvmlab up/ps/exec/down run on libvirt)")
