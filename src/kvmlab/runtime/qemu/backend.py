"""The qemu backend: kvmlab starts each guest's QEMU itself (the default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvmlab.runtime.machine import Backend, MachineConfig, Progress
from kvmlab.runtime.qemu.machine import QemuMachine

if TYPE_CHECKING:
    from kvmlab.render.target import Target
    from kvmlab.spec import Guest, LoadedLab


class QemuBackend(Backend):
    """kvmlab's own QEMU processes, on this host, in its run directory."""

    name = "qemu"

    def machine(
        self,
        loaded: LoadedLab,
        path: tuple[str, ...],
        guest: Guest,
        config: MachineConfig,
        target: Callable[[], Target],
        progress: Progress,
    ) -> QemuMachine:
        return QemuMachine(config)  # config.argv is the rendered command line

    def check(self, loaded: LoadedLab, only: str | None = None, start_inner: bool = True) -> None:
        """Everything the qemu backend runs is checked by the spec and the host checks."""

    def levels(self, loaded: LoadedLab, wanted: set[str], asked: bool) -> set[str]:
        return wanted

    def check_workloads(self, loaded: LoadedLab, migrations: bool) -> None:
        """The qemu backend runs every workload."""

    def check_command(self, loaded: LoadedLab, command: str) -> None:
        """The qemu backend runs every command."""

    def on_this_host(self, guest: Guest) -> bool:
        return True

    def facts(self, loaded: LoadedLab) -> dict[str, str]:
        return {}

    def close(self) -> None:
        """Nothing is held between guests."""
