"""The ``boot`` workload: each guest's boot stages as the runtime measured them, from
starting QEMU to its guest agent answering (nothing runs for it)."""

from __future__ import annotations

from kvmlab.bench.registry import BootStages, register

STAGES = ("qemu", "kernel", "init", "agent", "guest", "total")

register(
    BootStages(
        "boot",
        order=50,
        stages=STAGES,
        suites=("quick", "full"),
        command="kvmlab up (boot to guest agent ready)",
    )
)
