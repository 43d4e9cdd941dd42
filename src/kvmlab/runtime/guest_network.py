"""Guest-side network set-up for the default image, which has no DHCP client running.

QEMU's user networking (slirp) always serves the same addresses: the guest is
10.0.2.15/24, the host (and gateway) 10.0.2.2, DNS 10.0.2.3. The first user NIC is
configured with them, found by its MAC address. NICs on the lab's networks (and switch
ports with an address) get the addresses the lab gives them; others are left to the lab.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.identity import derived_mac
from kvmlab.spec import Guest, Lab, TapNic, UserNic, VhostUserNic
from kvmlab.spec.network import addresses

SLIRP_GUEST = "10.0.2.15/24"
SLIRP_HOST = "10.0.2.2"


@dataclass(frozen=True)
class UserNet:
    """The user-networking NIC of a guest: its MAC and the host address it reaches."""

    mac: str
    host: str = SLIRP_HOST


def user_net(lab: str, address: tuple[str, ...], guest: Guest) -> UserNet | None:
    """The guest's first user NIC, or None."""
    for i, nic in enumerate(guest.nics):
        if isinstance(nic, UserNic):
            return UserNet(nic.mac or derived_mac(lab, address, i))
    return None


def setup_script(net: UserNet) -> list[str]:
    """argv of a guest shell command bringing the NIC with ``net.mac`` up with slirp's address."""
    script = (
        "for d in /sys/class/net/*; do "
        f'[ "$(cat $d/address)" = "{net.mac}" ] && dev=${{d##*/}}; done; '
        '[ -n "$dev" ] || { echo "no NIC with MAC ' + net.mac + '" >&2; exit 1; }; '
        'ip link set "$dev" up && ip addr replace ' + SLIRP_GUEST + ' dev "$dev" && '
        f'ip route replace default via {net.host} dev "$dev" && '
        "echo nameserver 10.0.2.3 > /etc/resolv.conf"
    )
    return ["sh", "-c", script]


@dataclass(frozen=True)
class LabAddress:
    """A NIC kvmlab addresses in the guest: on a lab network, or a vhost-user switch port
    with an address."""

    index: int
    mac: str
    address: str
    queues: int


def lab_addresses(lab: Lab, path: tuple[str, ...], guest: Guest) -> list[LabAddress]:
    """The guest's NICs with an address from the lab (top-level guests only)."""
    given = addresses(lab)
    out = []
    for i, nic in enumerate(guest.nics):
        addr = given.get((path, i)) if isinstance(nic, TapNic) else None
        if isinstance(nic, VhostUserNic) and nic.port is not None and nic.address is not None:
            addr = nic.address
        if addr is not None:
            out.append(
                LabAddress(i, nic.mac or derived_mac(lab.name, path, i), str(addr), nic.queues)
            )
    return out


def address_script(nics: list[LabAddress]) -> list[str]:
    """argv of a guest shell command giving each NIC (found by MAC) its address and, with
    more than one queue pair, as many channels (``ethtool -L``; the multiqueue check says
    when that did not take)."""
    lines = []
    for n in nics:
        lines.append(
            f'dev=; for d in /sys/class/net/*; do [ "$(cat $d/address)" = "{n.mac}" ] && '
            "dev=${d##*/}; done; "
            f'[ -n "$dev" ] || {{ echo "no NIC with MAC {n.mac}" >&2; exit 1; }}; '
            f'ip link set "$dev" up && ip addr replace {n.address} dev "$dev" || exit 1'
        )
        if n.queues > 1:
            lines.append(f'ethtool -L "$dev" combined {n.queues} 2>/dev/null || true')
    return ["sh", "-c", "; ".join(lines)]
