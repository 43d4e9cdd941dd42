"""The stub backend: says what it runs and makes :class:`StubMachine` s."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from kvmlab.progress import Progress
from kvmlab.runtime.machine import Backend, Capabilities, MachineConfig
from tests.fakebackend.machine import StubMachine

if TYPE_CHECKING:
    from kvmlab.spec import Guest, LoadedLab


@dataclass
class StubBackend(Backend):
    """Stub guests on this host. ``fail_boot``: guests whose process exits while booting;
    ``interrupt``: guests during whose boot Ctrl-C arrives (a SIGINT to this process)."""

    name: ClassVar[str] = "stub"
    capabilities: ClassVar[Capabilities] = Capabilities(
        migration=False, migrate_lab=False, exits_compare=False, bench_migrations=False
    )

    fail_boot: Collection[str] = ()
    interrupt: Collection[str] = ()
    made: list[StubMachine] = field(default_factory=list)
    """Every machine it made, in order (what a test looks at afterwards)."""

    def machine(
        self,
        loaded: LoadedLab,
        path: tuple[str, ...],
        guest: Guest,
        config: MachineConfig,
        progress: Progress,
    ) -> StubMachine:
        name = "/".join(path)
        machine = StubMachine(config, fail=name in self.fail_boot, interrupt=name in self.interrupt)
        self.made.append(machine)
        return machine

    def check(self, loaded: LoadedLab, only: str | None = None, start_inner: bool = True) -> None:
        """A stub runs whatever the spec allows."""

    def levels(self, loaded: LoadedLab, wanted: set[str], asked: bool) -> set[str]:
        return wanted

    def on_this_host(self, guest: Guest) -> bool:
        return True

    def facts(self, loaded: LoadedLab) -> dict[str, str]:
        return {"backend": "stub guests (qemu-ga on this host, no VM)"}

    def close(self) -> None:
        """Nothing is held."""
