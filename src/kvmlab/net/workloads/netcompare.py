"""The ``netcompare`` workload: iperf3 (TCP per stream count both ways, UDP at small frames)
and ping over every network path of the lab, each repeated (paths and commands:
:mod:`kvmlab.net.netcompare`; the run: :mod:`kvmlab.net.netcompare_run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvmlab.bench.registry import LabRun, LabWorkload, register
from kvmlab.net.netcompare import WORKLOAD as NAME
from kvmlab.net.netcompare import plan_paths
from kvmlab.results.model import NETCOMPARE_DOCUMENT

if TYPE_CHECKING:
    from kvmlab.spec import Lab


def run(lab: LabRun) -> list[str]:
    from kvmlab.net.netcompare_run import run_netcompare

    def keep(doc: dict[str, Any]) -> None:
        lab.keep(NETCOMPARE_DOCUMENT, doc)

    run_netcompare(lab.lab, lab.variant, lab.repetitions, lab.launch, lab.at, lab.add, keep)
    return []


def describe(lab: Lab) -> str:
    return "netcompare over the lab's network paths"


def declared(lab: Lab) -> bool:
    return bool(plan_paths(lab))


def unasked(lab: Lab) -> bool:
    """Only a lab with ``[networks]`` or addressed switch ports runs it unasked (user NICs
    alone: when named)."""
    from kvmlab.spec import VhostUserNic

    return bool(lab.networks) or any(
        isinstance(n, VhostUserNic) and n.address for g in lab.guests.values() for n in g.nics
    )


register(
    LabWorkload(
        NAME,
        order=100,
        what="network path (user NIC, [networks], addressed switch port)",
        levels=frozenset({"L1"}),
        declared=declared,
        describe=describe,
        run=run,
        unasked=unasked,
    )
)
