"""``--backend``, ``--connect`` and ``--persistent``: which backend runs a lab's guests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from kvmlab.errors import UsageError
from kvmlab.spec import LoadedLab
from kvmlab.spec.backend import check_uri

if TYPE_CHECKING:
    from kvmlab.cli.bench_extras import Extras
    from kvmlab.runtime.libvirt.lab import LibvirtBackend

BACKEND_HELP = "qemu (kvmlab runs QEMU) or libvirt (a libvirtd does); default: the lab's."
CONNECT_HELP = "libvirt URI for the libvirt backend (default: the lab's libvirt.uri)."
PERSISTENT_HELP = "libvirt: define domains persistently (they are undefined by down)."
TO_HELP = "libvirt guests: the destination libvirtd's URI (virDomainMigrate3)."
BackendOpt = Annotated[str | None, typer.Option("--backend", help=BACKEND_HELP)]
ConnectOpt = Annotated[str | None, typer.Option("--connect", "-c", help=CONNECT_HELP)]
PersistentOpt = Annotated[
    bool | None, typer.Option("--persistent/--transient", help=PERSISTENT_HELP)
]
BackendOpts = tuple[str | None, str | None, bool | None, bool | None]
"""``--backend``, ``--connect``, ``--persistent``, ``--qemu-as-root`` as given."""
ROOT_HELP = (
    "libvirt: let a domain's QEMU run as root where kvmlab needs it (vhost-user on "
    "the lab's switch, a nested guest hypervisor); such a guest reads the host root "
    "unmasked."
)
RootOpt = Annotated[bool | None, typer.Option("--qemu-as-root/--no-qemu-as-root", help=ROOT_HELP)]


def choose_backend(
    loaded: LoadedLab,
    backend: str | None,
    connect: str | None,
    persistent: bool | None,
    as_root: bool | None = None,
) -> LibvirtBackend | None:
    """The libvirt backend the options and the lab ask for, or None for kvmlab's QEMU."""
    if backend not in (None, "qemu", "libvirt"):
        raise UsageError(f"--backend {backend!r}: choose qemu or libvirt")
    if connect is not None:
        try:
            check_uri(connect)
        except ValueError as exc:
            raise UsageError(f"--connect: {exc}") from None
    chosen = backend or loaded.lab.backend
    if chosen != "libvirt" and connect is not None and backend is None:
        raise UsageError(
            f"--connect: {loaded.path} runs on the qemu backend; add --backend libvirt "
            '(or backend = "libvirt" in the lab)'
        )
    if chosen != "libvirt":
        if connect is not None or persistent is not None or as_root is not None:
            raise UsageError("--connect, --persistent and --qemu-as-root need --backend libvirt")
        named = [n for n, g in loaded.lab.guests.items() if g.libvirt_uri]
        if named:
            raise UsageError(
                f"{loaded.path}: guests.{named[0]}.libvirt_uri names a libvirt "
                "daemon, but the lab runs on the qemu backend (add --backend "
                'libvirt, or backend = "libvirt" in the lab)'
            )
        return None
    from kvmlab.runtime.libvirt.lab import LibvirtBackend

    spec = loaded.lab.libvirt
    return LibvirtBackend(
        connect or spec.uri,
        spec.persistent if persistent is None else persistent,
        spec.qemu_as_root if as_root is None else as_root,
    )


def qemu_only(loaded: LoadedLab, command: str) -> None:
    """Refuse a lab that asks for the libvirt backend in a command only the qemu one runs."""
    if loaded.lab.backend == "libvirt":
        raise UsageError(
            f"{loaded.path}: backend = \"libvirt\": 'kvmlab {command}' runs only "
            "on the qemu backend so far (kvmlab up/ps/exec/down run on libvirt)"
        )


def libvirt_levels(loaded: LoadedLab, wanted: set[str], asked: bool, local: bool) -> set[str]:
    """The levels ``kvmlab bench``/``run`` measures on the libvirt backend: all of them on a
    daemon of this host; L0 and L1 on a remote one (a guest hypervisor's own guests are
    reached through a socket of its QEMU). L2 asked for by ``--levels`` of a remote daemon
    is refused; the default levels simply leave it out."""
    if local:
        return wanted
    if "L2" in wanted and asked:
        raise UsageError(
            f"{loaded.path}: --levels L2 on a remote libvirt: guests inside a "
            "guest hypervisor run on a libvirt daemon of this host or on the "
            "qemu backend (use --levels L0,L1)"
        )
    return wanted - {"L2"}


def libvirt_extras(loaded: LoadedLab, extras: Extras, backend: LibvirtBackend) -> None:
    """Refuse the lab's own workloads the libvirt backend does not run yet, by name; the
    others (PVP, netcompare) run their guests through ``backend``."""
    if extras.migrations:
        raise UsageError(
            f"{loaded.path}: migrations run only on the qemu backend so far; "
            "on libvirt leave them out with --only (e.g. --only cpu,memory,disk,"
            "net,boot), or migrate a libvirt guest with kvmlab migrate --to URI"
        )
    extras.backend = backend
