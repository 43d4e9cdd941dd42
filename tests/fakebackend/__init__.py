"""A third guest backend that runs no VM, for fast tests of what orchestrates guests
(``runtime/lab.py``'s up and down, ``bench/session.py``'s suite), as libvirt's
``test:///default`` driver and Firecracker's VM factory serve their callers.

It is a backend like ``runtime/qemu`` and ``runtime/libvirt``, written against the guest
contract only: this package, and one registration line
(``backends.register(fakebackend.KIND)``). A stub guest is a local process, the host's
``qemu-ga`` listening on the guest's agent socket (the real agent protocol: ``exec`` runs
the command on this host, in the guest's own directory; every RPC that could touch the
host beyond that is blocked); its monitor answers a few QMP commands; ``kvmlab`` run
inside it is this kvmlab with the stub registered (:mod:`.inner`), so a guest hypervisor
starts its guests as a real one does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.runtime.machine import Backend, BackendChoice, BackendKind, Machine

if TYPE_CHECKING:
    from kvmlab.spec import LoadedLab

NAME = "stub"


def _machine() -> type[Machine]:
    from tests.fakebackend.machine import StubMachine

    return StubMachine


def _make(loaded: LoadedLab, given: BackendChoice) -> Backend:
    from tests.fakebackend.backend import StubBackend

    return StubBackend()


KIND = BackendKind(name=NAME, machine=_machine, make=_make, transport=None)
"""The stub's record in the registry: its machine, how a command makes it, no migration."""
