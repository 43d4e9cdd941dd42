"""A lab's private networks: one network namespace (``kvmlab-<lab>-net``) holding a Linux
bridge per ``[networks.NAME]``, the bridge carrying the network's host-side address, and
the guests' taps.

QEMU creates each tap itself (by the name kvmlab derives, ``ifname=kvt...``), in the
host's namespace where it runs; as soon as the guest is up kvmlab moves the tap into the
lab's namespace and onto its bridge. The taps are not persistent: they go when their QEMU
exits. The namespace is on record (``LAB/.net/net.json``) before it exists and is deleted
with the lab, or by the next kvmlab after a crash (by the lab's name, never a name read
from disk); nothing touches the host's own interfaces or routes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import KvmlabError, StateError
from kvmlab.fabric import namespaces
from kvmlab.proc.confined import create_owned, remove_owned, write_private
from kvmlab.proc.signals import deferred_signals
from kvmlab.spec.lab import Lab

NET_DIR = ".net"
RECORD = "net.json"
VHOST_NET = Path("/dev/vhost-net")
TAP_PREFIXES = ("kvt", "kvu")
"""A guest's tap on a lab network has two names (:func:`alternate`): a migrating guest's
destination QEMU takes the one its source does not hold."""
_MASTER = re.compile(r"\smaster (\S+)\s")


def check_vhost_net(lab_file: str, lab: Lab, guests: Sequence[str]) -> None:
    """Refuse (:class:`StateError`) before anything starts when a guest has a vhost-net NIC
    and the host no /dev/vhost-net (QEMU would fail at start with a less helpful message)."""
    if VHOST_NET.exists():
        return
    keys = [
        f"guests.{g}.nics[{i}]"
        for g in guests
        for i, n in enumerate(lab.guests[g].nics)
        if n.type == "vhost-net"
    ]
    if keys:
        raise StateError(
            f"{lab_file}: {', '.join(keys)}: vhost-net needs {VHOST_NET}, which "
            'this host lacks: modprobe vhost_net (or use type = "tap"); '
            "`kvmlab run` measures the lab's other paths without it"
        )


def bridge_name(index: int) -> str:
    """The bridge of the lab's ``index``-th network (names live in the lab's namespace)."""
    return f"kvbr{index}"


@dataclass(frozen=True)
class TapPlan:
    """A tap QEMU will create and kvmlab will move onto a network's bridge."""

    guest: str
    tap: str
    network: str


class LabNet:
    """The networks of one lab; a context manager that deletes them."""

    def __init__(self, lab: Lab, root: Path) -> None:
        self.lab = lab
        self.dir = root
        self.ns = namespaces.ns_name(lab.name, "net")
        self.created = False

    def bridge(self, network: str) -> str:
        """The bridge of a network of the lab."""
        return bridge_name(list(self.lab.networks).index(network))

    def start(self, taps: Sequence[TapPlan]) -> None:
        """Namespace (on record from its creation), bridges with their host addresses;
        refused when a tap name is already an interface of the host (QEMU would attach a
        guest to somebody else's tap)."""
        taken = [
            f"{t.tap} (guest {t.guest}'s on network {t.network})"
            for t in taps
            if Path(f"/sys/class/net/{t.tap}").exists()
        ]
        if taken:
            raise StateError(
                f"lab {self.lab.name}: interface {', '.join(taken)} exists on the "
                "host; QEMU would join that tap instead of making kvmlab's (a "
                "kvmlab with another KVMLAB_RUN_DIR running this lab?)"
            )
        if namespaces.exists(self.ns):
            namespaces.create(self.ns)  # refuses, saying whose it may be
        create_owned(self.dir, f"networks of lab {self.lab.name}")
        with deferred_signals():  # on record before it exists: a crash leaves no stray one
            write_private(self.dir / RECORD, json.dumps({"netns": self.ns}))
            self.created = True
            namespaces.create(self.ns)
        for i, (name, net) in enumerate(self.lab.networks.items()):
            br = bridge_name(i)
            namespaces.ip(
                "link",
                "add",
                br,
                "type",
                "bridge",
                netns=self.ns,
                what=f"creating the bridge of network {name}",
            )
            namespaces.ip(
                "addr",
                "add",
                str(net.host),
                "dev",
                br,
                netns=self.ns,
                what=f"giving network {name} its host address",
            )
            namespaces.ip("link", "set", br, "up", netns=self.ns, what=f"bringing {br} up")

    def attach(self, plan: TapPlan) -> None:
        """Move a running guest's tap into the namespace, onto its bridge, up."""
        if not Path(f"/sys/class/net/{plan.tap}").exists():
            raise StateError(f"{plan.guest}: its tap {plan.tap} did not appear")
        namespaces.ip(
            "link",
            "set",
            plan.tap,
            "netns",
            self.ns,
            what=f"{plan.guest}: moving tap {plan.tap} into {self.ns}",
        )
        namespaces.ip(
            "link",
            "set",
            plan.tap,
            "master",
            self.bridge(plan.network),
            "up",
            netns=self.ns,
            what=f"{plan.guest}: putting {plan.tap} on its bridge",
        )

    def attacher(self, plans: Sequence[TapPlan]) -> Callable[[], None] | None:
        """A callable attaching these taps (None when there are none)."""
        if not plans:
            return None

        def attach_all() -> None:
            for plan in plans:
                self.attach(plan)

        return attach_all

    def stop(self) -> None:
        """Delete the namespace (bridges and any tap left in it go with it), then the dir."""
        if self.created:
            namespaces.delete(self.ns)
            self.created = False
        remove_owned(self.dir)

    def __enter__(self) -> LabNet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_recorded(root: Path, lab: str) -> bool:
    """Delete the namespace of lab ``lab``'s networks when another kvmlab left its directory
    ``root`` (whatever its record says: the name is the lab's), then the directory; True
    when there was a namespace."""
    if not root.exists():
        return False
    name = namespaces.ns_name(lab, "net")
    had = namespaces.exists(name)
    namespaces.delete(name)
    remove_owned(root)
    return had


def alternate(name: str) -> str | None:
    """The other name of a kvmlab network tap (None for a tap kvmlab did not name)."""
    for mine, other in (TAP_PREFIXES, TAP_PREFIXES[::-1]):
        if name.startswith(mine):
            return other + name[len(mine) :]
    return None


def master(ns: str, tap: str) -> str | None:
    """The bridge ``tap`` is on in namespace ``ns`` (None when it is not there)."""
    try:
        shown = namespaces.ip("-o", "link", "show", "dev", tap, netns=ns)
    except KvmlabError:
        return None
    found = _MASTER.search(shown)
    return found.group(1) if found else ""


def bridge_of(lab: str, tap: str) -> str | None:
    """The bridge a kvmlab network tap is on now, under whichever of its two names it has
    (a migrated guest's tap has the other); None when neither is bridged in the lab's
    namespace."""
    ns = namespaces.ns_name(lab, "net")
    other = alternate(tap)
    if other is None or not namespaces.exists(ns):
        return None
    for name in (tap, other):
        bridge = master(ns, name)
        if bridge:
            return bridge
    return None
