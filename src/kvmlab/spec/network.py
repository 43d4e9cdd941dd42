"""``[networks.NAME]``: private layer-2 networks of a lab (a bridge in the lab's own network
namespace, kvmlab's taps on it) and the addresses guests get on them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from kvmlab.spec.base import SpecModel
from kvmlab.spec.devices import TapNic, VhostUserNic
from kvmlab.spec.units import Ipv4Network

if TYPE_CHECKING:
    from kvmlab.spec.lab import Lab

FIRST_GUEST = 10
"""Unset guest addresses are given from ``.10`` of the subnet up."""
SLIRP_NET = IPv4Network("10.0.2.0/24")
"""User networking's own subnet in every guest."""


def unusable(net: IPv4Network) -> str | None:
    """Why a subnet cannot be a lab's private network (None when it can)."""
    if net.prefixlen < 8:
        return f"{net} is wider than any private range: use e.g. 10.77.0.0/24"
    for what, bad in (
        ("loopback", net.is_loopback),
        ("link-local", net.is_link_local),
        ("multicast", net.is_multicast),
        ("reserved", net.is_reserved),
        ("unspecified", net.subnet_of(IPv4Network("0.0.0.0/8"))),
    ):
        if bad:
            return f"{net} is a {what} range: use a private one, e.g. 10.77.0.0/24"
    if not net.is_private:
        return (
            f"{net} is not a private range (10/8, 172.16/12, 192.168/16): a lab's network "
            "must not shadow real addresses"
        )
    if net.overlaps(SLIRP_NET):
        return f"{net} overlaps user networking's {SLIRP_NET} in the guests"
    return None


class NetworkSpec(SpecModel):
    """A private network: a Linux bridge in the lab's network namespace (`kvmlab-LAB-net`),
    the tap of every NIC naming it, and the host side, the bridge's own address, which is
    where host-side servers (iperf3) listen. Nothing touches the host's interfaces or
    routes; the namespace goes with the lab."""

    subnet: Ipv4Network = IPv4Network("10.77.0.0/24")
    """IPv4 subnet; the host side is its first address, guests from `.10` up."""

    @field_validator("subnet", mode="before")
    @classmethod
    def _network_address(cls, v: object) -> object:
        if isinstance(v, str) and "/" in v:
            fixed = None
            with contextlib.suppress(ValueError):
                fixed = IPv4Network(v, strict=False)
            if fixed is not None and str(fixed) != v:
                raise ValueError(f"{v} has host bits set: did you mean {fixed}?")
        return v

    @field_validator("subnet")
    @classmethod
    def _usable(cls, v: IPv4Network) -> IPv4Network:
        if why := unusable(v):
            raise ValueError(why)
        if v.prefixlen > 28:
            raise ValueError(f"{v} has room for too few guests: use a /28 or larger")
        return v

    @property
    def host(self) -> IPv4Interface:
        """The bridge's address (the host side of the network)."""
        return IPv4Interface(f"{self.subnet.network_address + 1}/{self.subnet.prefixlen}")


class NetCompareSpec(SpecModel):
    """`netcompare`: on every network path of the lab (user/slirp to the host, a lab network
    between two guests and to its host side, vhost-user through the switch between two
    guests), iperf3 TCP with each stream count in both directions, UDP at small frames and
    ping; on a multiqueue NIC, how the streams spread over its queues (as in the networking
    course lab)."""

    seconds: int = Field(default=5, ge=1, le=600)
    """Seconds of each iperf3 run (whole seconds, as iperf3 takes them)."""

    streams: list[int] = Field(default=[1, 30], min_length=1)
    """iperf3 `-P` values (the networking course lab used 1 and 30)."""

    udp_frame: int = Field(default=64, ge=64, le=1518)
    """Ethernet frame size (bytes, with CRC) of the UDP packet-rate run."""

    pings: int = Field(default=200, ge=10, le=10000)
    """Echo requests per ping run (10 ms apart); p99 comes from their round trips."""

    repetitions: int | None = Field(default=None, ge=1, le=50)
    """Repetitions of every measurement; unset: the suite's."""

    queues: list[int] = []
    """On a path whose client NIC has several queue pairs: channel counts to compare with
    the most streams (`ethtool -L ... combined N` in both guests), e.g. `[1, 2, 4]` (the
    networking course lab compared 1 and 8); each at most the NIC's `queues`. Empty: only
    the NIC's own count."""

    @field_validator("streams", "queues")
    @classmethod
    def _counts(cls, v: list[int]) -> list[int]:
        if any(n < 1 or n > 128 for n in v):
            raise ValueError("each count is from 1 to 128")
        if len(set(v)) != len(v):
            raise ValueError(f"{v} names a count twice")
        return v


def network_nics(lab: Lab) -> Iterator[tuple[tuple[str, ...], int, TapNic]]:
    """Every top-level guest NIC on a lab network, in lab order."""
    for path, guest in lab.walk():
        for i, nic in enumerate(guest.nics):
            if isinstance(nic, TapNic) and nic.network is not None and len(path) == 1:
                yield path, i, nic


def addresses(lab: Lab) -> dict[tuple[tuple[str, ...], int], IPv4Interface]:
    """The address of each NIC on a lab network (given, else the next free from ``.10``
    below the broadcast address), keyed by (guest path, NIC index); NICs naming an unknown
    network, or finding no free address, are left out (:func:`check_networks` says why)."""
    out: dict[tuple[tuple[str, ...], int], IPv4Interface] = {}
    taken = {(n.network, int(n.address.ip)) for _, _, n in network_nics(lab) if n.address}
    nexts: dict[str, int] = {}
    for path, i, nic in network_nics(lab):
        name = nic.network or ""
        net = lab.networks.get(name)
        if net is None:
            continue
        prefix = net.subnet.prefixlen
        if nic.address is not None:
            out[(path, i)] = IPv4Interface(f"{nic.address.ip}/{prefix}")
            continue
        ip = nexts.get(name, int(net.subnet.network_address) + FIRST_GUEST)
        last = int(net.subnet.broadcast_address) - 1
        while ip <= last and (name, ip) in taken:
            ip += 1
        if ip > last:
            continue
        taken.add((name, ip))
        nexts[name] = ip + 1
        out[(path, i)] = IPv4Interface(f"{IPv4Address(ip)}/{prefix}")
    return out


def check_networks(lab: Lab) -> Iterator[tuple[str, str]]:
    """(key, message) for network problems: unknown networks, addresses outside the subnet
    or taken twice, taps naming themselves on a network, nested guests on one."""
    seen: dict[str, str] = {}
    for name, spec in lab.networks.items():
        for other, subnet in seen.items():
            if spec.subnet.overlaps(lab.networks[other].subnet):
                yield f"networks.{name}.subnet", f"overlaps networks.{other} ({subnet})"
        seen[name] = str(spec.subnet)
    given = addresses(lab)
    owners: dict[IPv4Address, str] = {}
    for path, guest in lab.walk():
        gkey = ".".join(f"guests.{p}" for p in path)
        for i, nic in enumerate(guest.nics):
            key = f"{gkey}.nics[{i}]"
            if isinstance(nic, TapNic) and nic.network is not None:
                net = lab.networks.get(nic.network)
                if net is None:
                    known = ", ".join(lab.networks) or "none"
                    yield f"{key}.network", f"no network {nic.network!r} (the lab's: {known})"
                    continue
                if len(path) > 1:
                    yield f"{key}.network", "only top-level guests reach the lab's networks"
                if nic.ifname is not None:
                    yield f"{key}.ifname", "kvmlab names the taps of a network: leave it out"
                addr = given.get((path, i))
                if nic.address is not None and (
                    nic.address.ip not in net.subnet
                    or nic.address.ip == net.host.ip
                    or nic.address.ip in (net.subnet.network_address, net.subnet.broadcast_address)
                ):
                    yield (
                        f"{key}.address",
                        f"{nic.address.ip} is not a guest address of "
                        f"{net.subnet} (the host side is {net.host.ip})",
                    )
                elif addr is None:
                    yield f"{key}.network", f"{net.subnet} has no free address left"
                else:
                    if addr.ip in owners:
                        yield f"{key}.address", f"{addr.ip} is already {owners[addr.ip]}'s"
                    owners[addr.ip] = key
            elif isinstance(nic, TapNic) and nic.address is not None:
                yield f"{key}.address", "an address needs network = ... (a lab network)"
            if isinstance(nic, VhostUserNic) and nic.address is not None:
                yield from _switch_address(lab, key, nic.port, nic.address, owners)


def _switch_address(
    lab: Lab, key: str, port: str | None, addr: IPv4Interface, owners: dict[IPv4Address, str]
) -> Iterator[tuple[str, str]]:
    """The address of a switch port's NIC: a guest address of a usable private subnet of
    its own, not a lab network's, not taken."""
    net = addr.network
    if port is None:
        yield f"{key}.address", "an address needs port = ... (the lab's switch)"
    elif net.prefixlen == 32:
        yield f"{key}.address", "give the prefix, e.g. 10.78.0.11/24"
    elif why := unusable(net):
        yield f"{key}.address", why
    elif addr.ip in (net.network_address, net.broadcast_address):
        yield f"{key}.address", f"{addr.ip} is the network's own address, not a guest's"
    elif clash := next((n for n, s in lab.networks.items() if s.subnet.overlaps(net)), None):
        yield f"{key}.address", f"{net} overlaps networks.{clash}: give the switch its own subnet"
    elif addr.ip in owners:
        yield f"{key}.address", f"{addr.ip} is already {owners[addr.ip]}'s"
    owners[addr.ip] = key
