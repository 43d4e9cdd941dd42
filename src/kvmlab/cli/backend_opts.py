"""``--backend``, ``--connect`` and ``--persistent``: which backend runs a lab's guests."""

from __future__ import annotations

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
    """The backend the options and the lab ask for: kvmlab's QEMU, or a libvirtd."""
    from kvmlab.runtime import backends

    option, connect, persistent, as_root = (
        given.backend,
        given.connect,
        given.persistent,
        given.as_root,
    )
    if option is not None and option not in backends.BACKEND_NAMES:
        raise UsageError(f"--backend {option!r}: choose {' or '.join(backends.BACKEND_NAMES)}")
    if connect is not None:
        from kvmlab.spec.backend import uri_option

        uri_option(connect, "--connect")
    chosen = option or loaded.lab.backend
    if chosen == "qemu" and connect is not None and option is None:
        raise UsageError(
            f"--connect: {loaded.path} runs on the qemu backend; add --backend libvirt "
            '(or backend = "libvirt" in the lab)'
        )
    if chosen == "qemu":
        if connect is not None or persistent is not None or as_root is not None:
            raise UsageError("--connect, --persistent and --qemu-as-root need --backend libvirt")
        named = [n for n, g in loaded.lab.guests.items() if g.libvirt_uri]
        if named:
            raise UsageError(
                f"{loaded.path}: guests.{named[0]}.libvirt_uri names a libvirt "
                "daemon, but the lab runs on the qemu backend (add --backend "
                'libvirt, or backend = "libvirt" in the lab)'
            )
        return backends.QEMU
    spec = loaded.lab.libvirt
    return backends.libvirt(
        connect or spec.uri,
        spec.persistent if persistent is None else persistent,
        spec.qemu_as_root if as_root is None else as_root,
    )


def check_command(loaded: LoadedLab, command: str) -> None:
    """Refuse, before anything starts, a command the lab's backend does not run."""
    backend = choose_backend(loaded, BackendOptions())
    try:
        backend.check_command(loaded, command)
    finally:
        backend.close()
