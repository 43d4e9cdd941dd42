"""How each backend moves a guest (:mod:`.base` is what the engine asks of one); the
transport for a guest is chosen here, by the backend its record names."""

from __future__ import annotations

from pathlib import Path

from kvmlab.migrate.modes import Settings
from kvmlab.migrate.transports.base import Route, Transport
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord


def _by_backend() -> dict[str, type[Transport]]:
    from kvmlab.migrate.transports.libvirt import LibvirtTransport
    from kvmlab.migrate.transports.qmp import QmpTransport

    return {"qemu": QmpTransport, "libvirt": LibvirtTransport}


def transport_for(
    source: Machine, guest_dir: Path, record: GuestRecord, settings: Settings, route: Route
) -> Transport:
    """The transport that migrates ``source`` along ``route``; a route its backend cannot
    take is refused, saying which one it can."""
    chosen = _by_backend()[record.backend]
    chosen.check_route(route, record)
    return chosen(source, guest_dir, record, settings, route)
