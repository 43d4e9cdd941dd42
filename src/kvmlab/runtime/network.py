"""Guest-side network set-up for the default image, which has no DHCP client running.

QEMU's user networking (slirp) always serves the same addresses: the guest is
10.0.2.15/24, the host (and gateway) 10.0.2.2, DNS 10.0.2.3. The first user NIC is
configured with them, found by its MAC address; other NICs are left to the lab.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.identity import derived_mac
from kvmlab.spec import Guest, UserNic

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
        f"ip route replace default via {net.host} dev \"$dev\" && "
        "echo nameserver 10.0.2.3 > /etc/resolv.conf"
    )
    return ["sh", "-c", script]
