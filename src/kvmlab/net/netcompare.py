"""The network paths of a lab and the commands `netcompare` runs on each (pure: plans and
argv; the workload is :mod:`kvmlab.net.workloads.netcompare`, its run
:mod:`kvmlab.net.netcompare_run`, its output read by :mod:`kvmlab.bench.parsers`).

Paths: ``user (slirp)`` from the first guest with a user NIC to the host (slirp's
10.0.2.2 is the host's loopback); per lab network, ``tap`` or ``tap+vhost-net`` between
its first two guests and from the first guest to the host side (the bridge's address in
the lab's namespace); ``vhost-user (<switch>)`` between two guests whose addressed switch
ports share a subnet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from ipaddress import IPv4Interface
from typing import Literal

from kvmlab.bench import tools
from kvmlab.fabric.switch import lab_ports
from kvmlab.render.identity import derived_mac
from kvmlab.runtime.guest_network import SLIRP_HOST
from kvmlab.spec import Lab, TapNic, UserNic, VhostUserNic
from kvmlab.spec.network import addresses

WORKLOAD = "netcompare"
SEP = ": "
"""Between a path's name and the test in a metric name."""
SERVER_PORT = 5201
"""iperf3's port inside guests and the lab's namespace (private addresses only)."""
UDP_OVERHEAD = 14 + 20 + 8 + 4
"""Ethernet header, IPv4, UDP and CRC around an iperf3 UDP payload."""


@dataclass(frozen=True)
class Endpoint:
    """One end of a path: a guest (by name), the lab network's host side (inside the lab's
    namespace) or the host itself (its loopback, which slirp's 10.0.2.2 reaches)."""

    kind: Literal["guest", "netns", "host"]
    name: str
    addr: str
    """Where the server listens (a guest's or the bridge's address; 127.0.0.1 for the host)."""
    reach: str
    """The address the client connects to (slirp's 10.0.2.2 for the host)."""
    mac: str | None = None
    """A guest's NIC on this path."""


@dataclass(frozen=True)
class NetPath:
    """A client guest, a server end, and the label every figure of it carries."""

    label: str
    a: Endpoint
    b: Endpoint
    queues: int = 1
    """Queue pairs of the client guest's NIC on this path."""

    @property
    def name(self) -> str:
        """``tap a-b``: the path's label and its two ends."""
        return f"{self.label} {self.a.name}-{self.b.name}"

    def metric(self, test: str) -> str:
        """A figure's metric name, ``tap a-b: tcp P1 ->`` (``->``: the client sends)."""
        return f"{self.name}{SEP}{test}"


def _guest(lab: Lab, name: str, index: int, iface: IPv4Interface | str) -> Endpoint:
    addr = str(iface.ip) if isinstance(iface, IPv4Interface) else iface
    mac = lab.guests[name].nics[index].mac or derived_mac(lab.name, (name,), index)
    return Endpoint("guest", name, addr, addr, mac)


def _label(*types: str) -> str:
    kinds = set(types)
    return (
        "tap+vhost-net"
        if kinds == {"vhost-net"}
        else ("tap" if kinds == {"tap"} else "tap/vhost-net")
    )


def plan_paths(lab: Lab, switch_kind: str | None = None) -> list[NetPath]:
    """Every path the lab offers, in the order the networking course lab compares them; a
    name that would repeat (two networks, two switch subnets) gets what it goes through
    added."""
    out: list[tuple[NetPath, str]] = []
    user = next(
        (
            (n, i)
            for n, g in lab.guests.items()
            if g.boot == "image"
            for i, x in enumerate(g.nics)
            if isinstance(x, UserNic)
        ),
        None,
    )
    if user is not None:
        host = Endpoint("host", "host", "127.0.0.1", SLIRP_HOST)
        out.append((NetPath("user (slirp)", _guest(lab, *user, "10.0.2.15"), host), ""))
    given = addresses(lab)
    for net_name, net in lab.networks.items():
        on = [
            (p[0], i, given[(p, i)])
            for p, g in lab.walk()
            if len(p) == 1
            for i, n in enumerate(g.nics)
            if isinstance(n, TapNic) and n.network == net_name and (p, i) in given
        ]
        if not on:
            continue
        first, i0, addr0 = on[0]
        nic0 = lab.guests[first].nics[i0]
        client = _guest(lab, first, i0, addr0)
        peer = next(((g, i, a) for g, i, a in on if g != first), None)
        if peer is not None:
            second, i1, addr1 = peer
            label = _label(nic0.type, lab.guests[second].nics[i1].type)
            out.append(
                (NetPath(label, client, _guest(lab, second, i1, addr1), nic0.queues), net_name)
            )
        side = str(net.host.ip)
        out.append(
            (
                NetPath(
                    _label(nic0.type),
                    client,
                    Endpoint("netns", f"{net_name}-host", side, side),
                    nic0.queues,
                ),
                net_name,
            )
        )
    for (g0, i0, a0), (g1, i1, a1) in switch_pairs(lab):
        q0 = lab.guests[g0].nics[i0].queues
        out.append(
            (
                NetPath(
                    f"vhost-user ({switch_kind or 'switch'})",
                    _guest(lab, g0, i0, a0),
                    _guest(lab, g1, i1, a1),
                    q0,
                ),
                str(a0.network),
            )
        )
    names = [p.name for p, _ in out]
    return [
        replace(p, label=f"{p.label} via {via}") if names.count(p.name) > 1 and via else p
        for p, via in out
    ]


Port = tuple[str, int, IPv4Interface]


def switch_pairs(lab: Lab) -> list[tuple[Port, Port]]:
    """Addressed switch ports of two guests that the switch pairs (neighbours in its port
    order) and that share a subnet: the guest-to-guest paths through the switch."""
    by_port: dict[str, Port] = {}
    for name, guest in lab.guests.items():
        for i, nic in enumerate(guest.nics):
            if isinstance(nic, VhostUserNic) and nic.port and nic.address is not None:
                by_port[nic.port] = (name, i, nic.address)
    if lab.switch is None or not by_port:
        return []
    order = lab_ports(lab)
    out = []
    for a, b in zip(order[::2], order[1::2], strict=False):
        pa, pb = by_port.get(a), by_port.get(b)
        if pa and pb and pa[0] != pb[0] and pa[2].network == pb[2].network:
            out.append((pa, pb))
    return out


def unpaired(lab: Lab) -> list[str]:
    """Addressed switch ports that form no path, with why (the switch pairs neighbours)."""
    paired = {(g, i) for pair in switch_pairs(lab) for g, i, _ in pair}
    order = lab_ports(lab)
    out = []
    for name, guest in lab.guests.items():
        for i, nic in enumerate(guest.nics):
            if (
                isinstance(nic, VhostUserNic)
                and nic.port
                and nic.address is not None
                and (name, i) not in paired
                and nic.port in order
            ):
                j = order.index(nic.port)
                peer = order[j ^ 1] if (j ^ 1) < len(order) else None
                out.append(
                    f"guests.{name}.nics[{i}]: the switch pairs port {nic.port} with "
                    f"{peer or 'no port'}, which is not another guest's addressed "
                    "port in its subnet"
                )
    return out


def iperf_argv(
    path: NetPath,
    port: int,
    seconds: float,
    streams: int,
    reverse: bool,
    udp_payload: int | None = None,
) -> list[str]:
    """The client's iperf3 (in guest ``path.a``): TCP with ``streams``, or UDP at full rate
    with ``udp_payload``-byte datagrams; ``reverse``: the server sends."""
    return tools.iperf3_client(
        path.b.reach, port, seconds, streams=streams, udp_payload=udp_payload, reverse=reverse
    )


def ping_argv(path: NetPath, count: int) -> list[str]:
    """Echo requests 10 ms apart, every reply printed (p99 needs each round trip)."""
    return tools.ping(path.b.reach, count, 0.01, wait_s=2)


def without_vhost_net(lab: Lab) -> tuple[Lab, list[str]]:
    """The lab without its vhost-net NICs (for a host without /dev/vhost-net), and the
    keys of the NICs dropped. The others keep their MACs (fixed as derived from their
    original index), so the lab's other paths are the same guests' same NICs; their tap
    names follow their new index, consistently for QEMU and kvmlab."""
    dropped: list[str] = []
    guests = {}
    for name, guest in lab.guests.items():
        kept = []
        for i, nic in enumerate(guest.nics):
            if nic.type == "vhost-net":
                dropped.append(f"guests.{name}.nics[{i}]")
                continue
            mac = nic.mac or derived_mac(lab.name, (name,), i)
            kept.append(nic.model_copy(update={"mac": mac}))
        guests[name] = guest.model_copy(update={"nics": kept})
    if not dropped:
        return lab, []
    used = {n.network for g in guests.values() for n in g.nics if isinstance(n, TapNic)}
    networks = {k: v for k, v in lab.networks.items() if k in used}
    return lab.model_copy(update={"guests": guests, "networks": networks}), dropped
