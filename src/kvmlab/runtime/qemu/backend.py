"""The qemu backend: kvmlab starts each guest's QEMU itself (the default)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kvmlab.progress import Progress
from kvmlab.runtime.hostview import qemu_argv
from kvmlab.runtime.machine import Backend, MachineConfig
from kvmlab.runtime.qemu.machine import QemuMachine

if TYPE_CHECKING:
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
        progress: Progress,
    ) -> QemuMachine:
        """The guest's QEMU, its command line rendered from the spec and target."""
        assert config.guest is not None and config.target is not None
        argv = qemu_argv(loaded, path, config.guest, config.target)
        return QemuMachine(replace(config, argv=argv))

    def check(self, loaded: LoadedLab, only: str | None = None, start_inner: bool = True) -> None:
        """Everything the qemu backend runs is checked by the spec and the host checks."""

    def levels(self, loaded: LoadedLab, wanted: set[str], asked: bool) -> set[str]:
        return wanted

    def on_this_host(self, guest: Guest) -> bool:
        return True

    def facts(self, loaded: LoadedLab) -> dict[str, str]:
        return {}

    def close(self) -> None:
        """Nothing is held between guests."""


QEMU = QemuBackend()
"""kvmlab's own QEMU (the default backend; it holds nothing, so one serves every run)."""
