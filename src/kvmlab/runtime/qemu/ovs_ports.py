"""A migrating guest's ports on the lab's OVS-DPDK switch: a port of its own for the
destination QEMU, and the lab's port handed to it at the switch-over.

On OVS, QEMU is the vhost-user socket server (a ``dpdkvhostuserclient`` port connects to
it), and a QEMU with a vhost-user NIC does not finish starting until its backend has
connected. A destination QEMU on the same host therefore needs a socket of its own (the
other of the port's two names, ``PORT.sock`` and ``PORT.b.sock``) and an OVS port that
connects to it: ``PORT.next``, with no flow, so no packet goes there before the switch-over.
Once the guest runs on the destination, both are deleted and the lab's port is added
again, by its own name and OpenFlow number, on the destination's socket: the
flows (which name port numbers) forward to the destination from then on, and the switch's
record, its counters and the lab's port names stay what they were.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import KvmlabError, StateError
from kvmlab.fabric.ovs import BRIDGE, Ovs
from kvmlab.fabric.switch import SWITCH_DIR, read_record, running
from kvmlab.runtime.qemu.handover import option, with_option
from kvmlab.runtime.rundir import LabDir

NEXT = ".next"
"""The destination's OVS port until the switch-over: ``PORT.next``."""
SECOND = ".b"
"""The second socket name of a port: ``PORT.b.sock``."""


@dataclass(frozen=True)
class PortMove:
    """One vhost-user NIC on the OVS switch: its port, its OpenFlow number, the socket the
    source listens on now and the destination's, the port's receive queues."""

    port: str
    ofport: str
    source: str
    dest: str
    rxq: str


def _other(path: str, port: str, root: Path) -> str:
    """The port's socket name the source does not use."""
    second = str(root / f"{port}{SECOND}.sock")
    return str(root / f"{port}.sock") if path == second else second


def _port_of(path: str, root: Path) -> str | None:
    """The switch port a socket of the switch's directory belongs to."""
    if Path(path).parent != root or not path.endswith(".sock"):
        return None
    stem = Path(path).name[: -len(".sock")]
    return stem[: -len(SECOND)] if stem.endswith(SECOND) else stem


def _ovs(lab: str) -> tuple[Ovs, Path] | None:
    """The lab's running OVS switch (None when the lab has none, or another kind)."""
    root = LabDir.of(lab).root / SWITCH_DIR
    rec = read_record(root)
    if rec is None or rec.kind != "ovs-dpdk" or not running(rec, root):
        return None
    return Ovs(root, rec.processes, netns=rec.netns), root


def _get(ovs: Ovs, port: str, column: str) -> str:
    return ovs.vsctl("--if-exists", "get", "Interface", port, column, wait=False).strip().strip('"')


def plan(lab: str, address: str, argv: list[str]) -> tuple[list[str], list[PortMove]]:
    """The destination's command line with a socket of its own for every vhost-user NIC on
    the lab's OVS switch, and the moves to make; unchanged (no moves) without one."""
    found = _ovs(lab)
    if found is None:
        return argv, []
    ovs, root = found
    out: list[str] = []
    moves: list[PortMove] = []
    previous = ""
    for arg in argv:
        if previous == "-chardev" and arg.startswith("socket,"):
            parts = arg.split(",")
            path = option(parts, "path")
            port = _port_of(path, root) if "server=on" in parts else None
            if port is not None:
                source = _get(ovs, port, "options:vhost-server-path")
                ofport = _get(ovs, port, "ofport")
                if not source or not ofport or ofport == "-1":
                    raise StateError(
                        f"cannot migrate {address}: the lab's OVS has no working port {port}"
                    )
                if _get(ovs, f"{port}{NEXT}", "name"):
                    raise StateError(
                        f"cannot migrate {address}: OVS port {port}{NEXT} of an earlier "
                        f"migration is still there; 'kvmlab down {lab}' and up again"
                    )
                dest = _other(source, port, root)
                rxq = _get(ovs, port, "options:n_rxq") or "1"
                moves.append(PortMove(port, ofport, source, dest, rxq))
                arg = with_option(parts, "path", dest)
        out.append(arg)
        previous = arg
    return out, moves


def _interface(name: str, move: PortMove) -> list[str]:
    return [
        "--",
        "set",
        "Interface",
        name,
        "type=dpdkvhostuserclient",
        f"options:vhost-server-path={move.dest}",
        f"options:n_rxq={move.rxq}",
    ]


def add_next(lab: str, moves: list[PortMove]) -> None:
    """The destination's OVS ports, without flows (before its QEMU starts: OVS retries
    until its socket is there)."""
    found = _ovs(lab)
    if found is None or not moves:
        return
    ovs, _ = found
    for move in moves:
        name = f"{move.port}{NEXT}"
        ovs.vsctl("add-port", BRIDGE, name, *_interface(name, move))


def hand_over(lab: str, moves: list[PortMove]) -> None:
    """At the switch-over: the lab's ports on the destination's sockets, by their own
    names and OpenFlow numbers; the destination's own ports gone."""
    found = _ovs(lab)
    if found is None or not moves:
        return
    ovs, _ = found
    gone: list[str] = []
    added: list[str] = []
    for move in moves:
        gone += ["--", "del-port", BRIDGE, f"{move.port}{NEXT}"]
        gone += ["--", "del-port", BRIDGE, move.port]
        added += ["--", "add-port", BRIDGE, move.port]
        added += [*_interface(move.port, move), f"ofport_request={move.ofport}"]
    # two transactions, each waited for: in one, OVS would keep the port's vhost-user
    # client (same name) on the source's socket, ignoring its new path
    ovs.vsctl(*gone[1:])
    ovs.vsctl(*added[1:])


def remove_next(lab: str, moves: list[PortMove]) -> None:
    """The destination's own ports gone (a migration that did not complete)."""
    found = _ovs(lab)
    if found is None:
        return
    ovs, _ = found
    for move in moves:
        with contextlib.suppress(KvmlabError):
            ovs.vsctl("--if-exists", "del-port", BRIDGE, f"{move.port}{NEXT}")
