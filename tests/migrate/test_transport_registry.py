"""Each backend's migration transport is the one its registry record names, given that
backend's machine: the engine never asks which class runs a guest."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.migrate.transports import transport_class
from kvmlab.migrate.transports.base import Transport
from kvmlab.runtime import backends
from kvmlab.runtime.rundir import GuestRecord


@pytest.mark.parametrize("name", ["qemu", "libvirt"])
def test_every_registered_backend_names_a_transport_of_its_own(name: str) -> None:
    record = GuestRecord("lab", ["vm"], 0, [], "tcg", "why", 1, 1 << 28, 1.0, backend=name)
    chosen = transport_class(record, Path("/nonexistent"))
    assert issubclass(chosen, Transport)
    machine = backends.kind(name).machine()
    # the transport's type parameter is its backend's machine class
    [base] = [b for b in chosen.__orig_bases__ if getattr(b, "__origin__", None) is Transport]  # type: ignore[attr-defined]
    assert base.__args__ == (machine,)


def test_a_record_naming_no_transport_class_is_refused() -> None:
    from kvmlab.runtime.machine import BackendKind

    odd = BackendKind("odd", backends.kind("qemu").machine, backends.kind("qemu").make, "os:path")
    backends.register(odd)
    try:
        record = GuestRecord("lab", ["vm"], 0, [], "tcg", "why", 1, 1 << 28, 1.0, backend="odd")
        with pytest.raises(TypeError, match="os:path is not a migration transport"):
            transport_class(record, Path("/nonexistent"))
    finally:
        backends.unregister("odd")
