"""``--backend``, ``--connect`` and ``--persistent``: which backend runs a lab's guests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from kvmlab.errors import UsageError

if TYPE_CHECKING:
    from kvmlab.runtime.machine import Backend
    from kvmlab.spec import LoadedLab

BACKEND_HELP = "qemu (kvmlab runs QEMU) or libvirt (a libvirtd does); default: the lab's."
CONNECT_HELP = "libvirt URI for the libvirt backend (default: the lab's libvirt.uri)."
PERSISTENT_HELP = "libvirt: define domains persistently (they are undefined by down)."
TO_HELP = "libvirt guests: the destination libvirtd's URI (virDomainMigrate3)."
BackendOpt = Annotated[str | None, typer.Option("--backend", help=BACKEND_HELP)]
ConnectOpt = Annotated[str | None, typer.Option("--connect", "-c", help=CONNECT_HELP)]
PersistentOpt = Annotated[
    bool | None, typer.Option("--persistent/--transient", help=PERSISTENT_HELP)
]


@dataclass(frozen=True)
class BackendOptions:
    """``--backend``, ``--connect``, ``--persistent``, ``--qemu-as-root`` as given."""

    backend: str | None = None
    connect: str | None = None
    persistent: bool | None = None
    as_root: bool | None = None


ROOT_HELP = (
    "libvirt: let a domain's QEMU run as root where kvmlab needs it (vhost-user on "
    "the lab's switch, a nested guest hypervisor); such a guest reads the host root "
    "unmasked."
)
RootOpt = Annotated[bool | None, typer.Option("--qemu-as-root/--no-qemu-as-root", help=ROOT_HELP)]


def choose_backend(loaded: LoadedLab, given: BackendOptions) -> Backend:
    """The backend the options and the lab ask for, made by its registered kind (each
    refuses the options that are not its own)."""
    from kvmlab.runtime import backends

    names = backends.names()
    if given.backend is not None and given.backend not in names:
        raise UsageError(f"--backend {given.backend!r}: choose {' or '.join(names)}")
    if given.connect is not None:
        from kvmlab.spec.backend import uri_option

        uri_option(given.connect, "--connect")
    return backends.make(given.backend or loaded.lab.backend, loaded, given)


@contextmanager
def lab_backend(loaded: LoadedLab) -> Iterator[Backend]:
    """The lab's own backend (no options given), closed afterwards: ask its
    ``capabilities`` before anything starts."""
    backend = choose_backend(loaded, BackendOptions())
    try:
        yield backend
    finally:
        backend.close()
