"""The ``pvp`` workload: the packet rate through the lab's ``[switch]``, the loopback ceiling
at L0 (no guest) and through its PVP guest at L1, for every frame size
(:mod:`kvmlab.net.pvp_run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.bench.registry import LabRun, LabWorkload, register
from kvmlab.net.pvp import WORKLOAD as NAME

if TYPE_CHECKING:
    from kvmlab.spec import Lab


def run(lab: LabRun) -> list[str]:
    from kvmlab.net.pvp_run import run_pvp

    run_pvp(lab.lab, lab.variant, lab.levels, lab.repetitions, lab.launch, lab.at, lab.add)
    return []


def describe(lab: Lab) -> str:
    assert lab.switch is not None
    return f"PVP through the {lab.switch.kind} switch"


def declared(lab: Lab) -> bool:
    return lab.switch is not None


register(
    LabWorkload(
        NAME,
        order=90,
        what="[switch]",
        levels=frozenset({"L0", "L1"}),
        declared=declared,
        describe=describe,
        run=run,
    )
)
