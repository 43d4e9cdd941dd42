"""How each backend moves a guest (:mod:`.base` is what the engine asks of one); the
transport for a guest is the one its backend's registry record names
(:attr:`kvmlab.runtime.machine.BackendKind.transport`), given that backend's machine."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from kvmlab.errors import UsageError
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.transports.base import Route, Transport
from kvmlab.runtime import backends
from kvmlab.runtime.rundir import GuestRecord


def transport_class(record: GuestRecord, guest_dir: Path) -> type[Transport[Any]]:
    """The transport class of the guest's backend; its guests not migrating is refused."""
    kind = backends.kind_of(record, guest_dir)
    if kind.transport is None:
        raise UsageError(
            f"{record.name} runs on the {kind.name} backend, which kvmlab migrates no guest of"
        )
    module, _, name = kind.transport.partition(":")
    found = getattr(importlib.import_module(module), name, None)
    if not (isinstance(found, type) and issubclass(found, Transport)):
        raise TypeError(f"backend {kind.name}: {kind.transport} is not a migration transport")
    return found


def transport_for(
    guest_dir: Path, record: GuestRecord, settings: Settings, route: Route
) -> Transport[Any]:
    """The transport that migrates the guest of ``record`` along ``route``, holding its
    backend's machine of it; a route its backend cannot take is refused, saying which one
    it can, before anything is asked of the guest."""
    chosen = transport_class(record, guest_dir)
    chosen.check_route(route, record)
    source = backends.attach(guest_dir, record)
    if not source.capabilities.migration:
        source.disconnect()
        raise UsageError(f"{record.name} cannot be migrated: it {source.capabilities.refused}")
    return chosen(source, guest_dir, record, settings, route)
