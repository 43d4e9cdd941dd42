"""A migrating guest's taps on the lab's networks: the destination QEMU gets taps of its own
on the same bridges before the migration starts.

QEMU creates a guest's tap in the host's namespace and kvmlab moves it onto its network's
bridge in the lab's namespace (:mod:`kvmlab.fabric.lab_networks`). A destination QEMU run
with the source's command line would create a tap of the same name in the host's
namespace (free there: the source's moved away) and stay off the bridge: the migrated
guest would lose its network while every check passed. So the destination's taps take the
other of two names kvmlab derives for each NIC (``kvt…`` and ``kvu…``, the one not in use),
and are moved onto the bridge their source tap is on once the destination QEMU runs, before
a byte of the guest moves. At the switch-over QEMU announces the guest from the new tap and
the bridge learns where it is; the source's tap goes with the source QEMU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import StateError
from kvmlab.fabric import namespaces
from kvmlab.fabric.lab_networks import alternate, master
from kvmlab.runtime.qemu.handover import option, with_option


@dataclass(frozen=True)
class TapMove:
    """One NIC's tap: the source's (in the lab's namespace), the destination's, its bridge."""

    source: str
    dest: str
    bridge: str


def plan(lab: str, address: str, argv: list[str]) -> tuple[list[str], list[TapMove]]:
    """The destination's command line with a tap of its own for every tap NIC, and the
    moves to make once it runs; :class:`StateError` for a tap that is not on one of the
    lab's networks (a tap the lab names is held by the source: a second QEMU cannot open
    it) or when both names of a NIC's tap are taken (an earlier attempt's leftover)."""
    ns = namespaces.ns_name(lab, "net")
    out: list[str] = []
    moves: list[TapMove] = []
    previous = ""
    for arg in argv:
        if previous == "-netdev" and arg.startswith("tap,"):
            parts = arg.split(",")
            named = option(parts, "ifname")
            other = alternate(named)
            if other is None or not namespaces.exists(ns):
                raise StateError(
                    f"cannot migrate {address}: its tap {named or '(QEMU-named)'} is not on one "
                    "of the lab's networks; the source QEMU holds it and a second QEMU on "
                    "this host cannot open it"
                )
            here = {name: master(ns, name) for name in (named, other)}
            current = [name for name, bridge in here.items() if bridge is not None]
            if len(current) != 1 or not here[current[0]]:
                raise StateError(
                    f"cannot migrate {address}: its tap on the lab's network is not one "
                    f"bridged tap in {ns} (found: {', '.join(current) or 'none'}); "
                    f"'kvmlab down {lab}' and up again"
                )
            source = current[0]
            dest = other if source == named else named
            if Path(f"/sys/class/net/{dest}").exists():
                raise StateError(
                    f"cannot migrate {address}: interface {dest}, its destination's tap, "
                    "exists on the host"
                )
            bridge = here[source]
            assert bridge
            moves.append(TapMove(source, dest, bridge))
            arg = with_option(parts, "ifname", dest)
        out.append(arg)
        previous = arg
    return out, moves


def attach(lab: str, moves: list[TapMove]) -> None:
    """Move the destination's taps (made by its QEMU in the host's namespace) onto their
    bridges in the lab's namespace, up."""
    ns = namespaces.ns_name(lab, "net")
    for move in moves:
        if not Path(f"/sys/class/net/{move.dest}").exists():
            raise StateError(f"the destination's tap {move.dest} did not appear")
        namespaces.ip(
            "link", "set", move.dest, "netns", ns, what=f"moving tap {move.dest} into {ns}"
        )
        namespaces.ip(
            "link",
            "set",
            move.dest,
            "master",
            move.bridge,
            "up",
            netns=ns,
            what=f"putting {move.dest} on {move.bridge}",
        )
