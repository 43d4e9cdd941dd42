"""The packet path of a migrating guest, probed and counted hop by hop: its port on the
lab's vswitch (:class:`SwitchPath`), else its tap on one of the lab's networks. There the
probes come from a peer guest on the same network when the lab runs one
(:class:`PeerPath`: the peer's ``kvmlab-echo`` relays the host's probes to the guest and
its echoes back, counting both ways), else from the host's address on that network
(:class:`NetworkPath`); the guest's NIC counts what reached it and what it sent back.

A guest whose vhost-user NIC sits on the switch port paired with kvmlab's generator port
(``kvmlab-gen``: the PVP layout, where generator and guest NIC 0 are neighbours) is
reached from the host like this: a testpmd *bridge* joins ``kvmlab-gen`` to a kernel tap
in a network namespace of its own (``unshare --net``: no name, gone with the bridge), the
host's prober sends UDP from a socket in that namespace at 1 kHz, and the guest's
``kvmlab-echo`` answers on the NIC, which kvmlab gives a documentation address
(192.0.2.2/24) for the migration and takes back after. Static neighbours on both ends: no
ARP crosses the switch-over.

Every hop with a counter is read with nothing in flight, before the first probe and after
the last echo: the prober, the bridge's two ports, the switch's two ports, the guest's
NIC (its kernel counters, which move with the guest). A loss then sits between two hops.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import os
import re
import socket
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import KvmlabError, RuntimeFailure, StateError
from kvmlab.fabric import namespaces
from kvmlab.fabric.lab_networks import TAP_PREFIXES, bridge_of
from kvmlab.fabric.switch import GEN_PORT, SWITCH_DIR, Switch, read_record, running
from kvmlab.fabric.testpmd import TestPmd
from kvmlab.guest.standalone import compile_dirty, dirty_source
from kvmlab.net.testpmd_stats import Snapshot
from kvmlab.net.traffic import HostTestPmd, SwitchCounted
from kvmlab.proc.confined import create_owned, remove_owned
from kvmlab.proc.netns import socket_at, socket_in
from kvmlab.progress import Progress
from kvmlab.render.dpdk import bridge_argv
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestEntry, GuestRecord, LabDir
from kvmlab.spec.switch import SwitchSpec

WORK_DIR = ".pathprobe"
TAP = "kvprobe0"
HOST_IP, GUEST_IP, PREFIX_LEN = "192.0.2.1", "192.0.2.2", 24
"""RFC 5737's TEST-NET-1: in the bridge's own namespace and on a NIC kvmlab addresses
only for the probe (refused if the guest already uses that network)."""
ECHO_PORT = 7778
"""``kvmlab-echo``'s port for the packet path (the network probe's is 7777)."""
RELAY_PORT = 7779
"""The UDP port of a peer guest's relay (``kvmlab-echo PORT TARGET TARGET_PORT COUNTS``)."""
RELAY_DIR = "/tmp/kvmlab-relay"
"""kvmlab's directory in the peer guest: the relay's counts, and the program itself when
the peer's image has none (a guest booting the host's root, a disk image), under the
hash of its source. The program stays for the next migration (copying it takes seconds
under TCG) and goes with the guest (a tmpfs)."""
RELAY_COUNTS = f"{RELAY_DIR}/counts"
"""Where the peer's relay writes its counts when stopped."""
RELAY_BIN = "/bin/kvmlab-echo"
RELAY_START_S = 10.0
"""How long the relay may take to listen once started (a slow guest's seconds)."""
RELAY_WAIT_S = 20.0
"""How long a stopped relay may take to write its counts (a slow guest's seconds)."""
READY_S = 60.0
BRIDGE_PORT, BRIDGE_TAP = 0, 1
"""The bridge testpmd's ports: the switch side (net_virtio_user), the tap."""

NIC_OF = r"""
nic_of() {  # the name of the NIC with MAC $1
    for n in /sys/class/net/*; do
        [ "$(cat "$n/address" 2>/dev/null)" = "$1" ] && { echo "${n##*/}"; return 0; }
    done
    echo "no NIC with MAC $1" >&2
    return 1
}
"""
"""A shell function the guest-side scripts start with."""

RELAY_PIDS = r"""
relay_pids() {  # the relays on port $1 (their command lines name a target)
    if command -v pgrep >/dev/null; then  # a command per process is slow over 9p
        pgrep -f "/kvmlab-echo $1 [0-9]"
        return 0
    fi
    for p in /proc/[0-9]*; do
        case "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" in
            */kvmlab-echo" $1 "[0-9]*) echo "${p#/proc/}" ;;
        esac
    done
}
"""
"""A shell function the peer's scripts start with."""

GUEST_SETUP = (
    NIC_OF
    + r"""
mac=$1; addr=$2; peer=$3; peer_mac=$4
dev=$(nic_of "$mac") || exit 4
# a killed kvmlab's probe address on this NIC: kvmlab's own, taken back first
ip -o -4 addr show dev "$dev" | grep -q " inet $addr/" && ip addr del "$addr/24" dev "$dev"
if ip -o -4 addr show dev "$dev" | grep -q " inet "; then
    echo "$dev has an address of its own (an addressed switch port): not probed" >&2; exit 5
fi
if ip -o addr show | grep -q " inet ${addr%.*}\."; then
    echo "the guest already has an address in ${addr%.*}.0/24" >&2; exit 5
fi
up=down
ip -o link show "$dev" | grep -q "[<,]UP[,>]" && up=up
v6=$(cat "/proc/sys/net/ipv6/conf/$dev/disable_ipv6" 2>/dev/null) || v6=-
undo() {
    ip addr del "$addr/24" dev "$dev" 2>/dev/null
    [ "$up" = up ] || ip link set "$dev" down
    [ "$v6" = - ] || echo "$v6" > "/proc/sys/net/ipv6/conf/$dev/disable_ipv6"
}
[ "$v6" = - ] || echo 1 > "/proc/sys/net/ipv6/conf/$dev/disable_ipv6"
ip addr add "$addr/24" dev "$dev" || { undo; exit 6; }
ip link set "$dev" up || { undo; exit 6; }
arp -i "$dev" -s "$peer" "$peer_mac" || { undo; echo "arp -s failed in the guest" >&2; exit 6; }
echo "$dev $up $v6"
"""
)
"""Address the NIC with this MAC for the probe (IPv6 off on it: no stray frames), the
bridge's tap as a static neighbour; print the NIC's name and what to restore (its link
state, its IPv6 setting). A step that fails undoes the ones before it."""

KILL_ECHO = r"""
for p in /proc/[0-9]*; do  # every kvmlab-echo on the probe's port (one restarted too)
    [ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)" = "/bin/kvmlab-echo $1 " ] \
        && kill "${p#/proc/}" 2>/dev/null
done
true
"""
"""Stop the probe's echo in the guest."""

GUEST_UNDO = r"""
dev=$1; addr=$2; peer=$3; up=$4; v6=$5
arp -i "$dev" -d "$peer" 2>/dev/null
ip addr del "$addr/24" dev "$dev" 2>/dev/null
[ "$up" = up ] || ip link set "$dev" down 2>/dev/null
[ "$v6" = - ] || echo "$v6" > "/proc/sys/net/ipv6/conf/$dev/disable_ipv6"
true
"""
"""The NIC as it was: the probe's address and neighbour gone, its link and IPv6 setting
back."""

GUEST_ADDRESS = (
    NIC_OF
    + r"""
dev=$(nic_of "$1") || exit 4
set -- $(ip -o -4 addr show dev "$dev")
[ -n "$4" ] || { echo "$dev has no IPv4 address" >&2; exit 5; }
echo "$dev ${4%/*}"
"""
)
"""The name and IPv4 address of the NIC with this MAC."""

PREPARE_RELAY = r"""
dir=$1; bin=$2; version=$3; mine=$1/$3/kvmlab-echo
kvmlabs() { [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ]; }  # a directory of root's, no link
if [ -e "$dir" ] || [ -L "$dir" ]; then
    kvmlabs "$dir" || {
        echo "$dir is not kvmlab's (a link, a file or another user's): left as it is" >&2
        exit 6
    }
else
    mkdir -m 700 "$dir" || exit 6
fi
chmod 700 "$dir" && rm -f "$dir/counts" "$dir/counts.tmp" || exit 6
for old in "$dir"/* "$dir"/.[!.]*; do  # another version's program, or anything else there
    [ -e "$old" ] || [ -L "$old" ] || continue
    [ "$old" = "$dir/$version" ] && kvmlabs "$old" && continue
    rm -rf "$old"  # a link is removed, never followed (no trailing slash)
done
if [ -x "$bin" ]; then echo "$bin"
elif [ -x "$mine" ]; then echo "$mine"
else echo "copy $mine"
fi
"""
"""kvmlab's directory in the peer (refused when something else has its name: never
followed), holding nothing but this version's program; the relay program to run (the
image's, else one kvmlab copied in before) or ``copy PATH`` (where to copy it first)."""

INSTALL_RELAY = r"""
mkdir -m 700 "${1%/*}" && gunzip -c > "$1.tmp" && chmod 700 "$1.tmp" && mv "$1.tmp" "$1"
"""
"""The relay program, gzipped on stdin, installed at $1."""

START_RELAY = r"""
dir=$1; wait=$2; shift 2
rm -f "$dir/relay.out" "$dir/relay.err"
"$@" </dev/null >"$dir/relay.out" 2>"$dir/relay.err" &
pid=$!
i=0
while [ "$i" -lt "$((wait * 10))" ]; do
    grep -q "^listening" "$dir/relay.out" 2>/dev/null && exit 0
    state=$(cut -d " " -f 3 "/proc/$pid/stat" 2>/dev/null)
    if [ -z "$state" ] || [ "$state" = Z ]; then
        echo "the relay exited: $(cat "$dir/relay.err")" >&2
        exit 8
    fi
    sleep 0.1
    i=$((i + 1))
done
kill "$pid" 2>/dev/null
echo "the relay did not listen in $wait s" >&2
exit 8
"""
"""Start the relay (the command after the directory and a wait in seconds), in the
background, its output in kvmlab's directory; return once it listens, or fail with what
it said (a port another program holds)."""

RELAY_HEALTH = (
    NIC_OF
    + RELAY_PIDS
    + r"""
port=$1; mac=$2
relay=stopped
[ -n "$(relay_pids "$port")" ] && relay=running
link=missing
dev=$(nic_of "$mac" 2>/dev/null) && link=$(cat "/sys/class/net/$dev/operstate" 2>/dev/null)
echo "$relay $link"
"""
)
"""Whether the peer's relay still runs, and its NIC's link state (``running up``)."""

STOP_RELAY = (
    RELAY_PIDS
    + r"""
port=$1; dir=$2; wait=$3; counts=$dir/counts
stopped=no
pids=$(relay_pids "$port")
[ -n "$pids" ] && kill $pids 2>/dev/null && stopped=yes
if [ ! -d "$dir" ] || [ -L "$dir" ] || [ ! -O "$dir" ]; then  # not kvmlab's: not touched
    [ "$wait" -gt 0 ] && { echo "no counts: $dir is not kvmlab's directory" >&2; exit 7; }
    exit 0
fi
[ "$wait" -gt 0 ] || { rm -f "$counts" "$counts.tmp"; exit 0; }
if [ "$stopped" = no ] && [ ! -s "$counts" ]; then
    echo "the relay was not running (it died or was killed): it left no counts" >&2
    exit 7
fi
i=0
while [ ! -s "$counts" ] && [ "$i" -lt "$((wait * 10))" ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$counts" ] || { echo "the relay wrote no counts in $wait s" >&2; exit 7; }
cat "$counts"
rm -f "$counts"
"""
)
"""Stop the peer's relay; with a wait (seconds), print the counts it wrote on its way out
(``in out back home``), else only remove them."""

GUEST_COUNTERS = r"""
cat "/sys/class/net/$1/statistics/rx_packets" "/sys/class/net/$1/statistics/tx_packets"
"""

BRIDGE_SETUP = r"""
set -e
ip link set lo up
for f in /proc/sys/net/ipv6/conf/*/disable_ipv6; do if [ -e "$f" ]; then echo 1 > "$f"; fi; done
ip addr add "$2/24" dev "$1"
ip neigh replace "$3" lladdr "$4" dev "$1" nud permanent
ip link set "$1" up
ip -o link show "$1"
"""
"""In the bridge's namespace: the tap addressed, the guest a static neighbour; its MAC."""


def paired_port(ports: list[str]) -> str | None:
    """The switch port paired with kvmlab's generator port (neighbours 0-1, 2-3, ...)."""
    if GEN_PORT not in ports:
        return None
    partner = ports.index(GEN_PORT) ^ 1
    return ports[partner] if partner < len(ports) else None


Target = tuple[str, int, Callable[[], socket.socket]]
"""Where the probes go: address, UDP port, how to make a socket that reaches it."""


def _guest_sh(machine: Machine, script: str, *args: str) -> str:
    """A script in the guest (through its agent); its output, or why it failed."""
    result = machine.exec(["sh", "-c", script, "sh", *args], timeout=60)
    if result.returncode != 0:
        why = result.stderr.decode(errors="replace").strip()
        raise RuntimeFailure(f"{machine.config.name}: packet path: {why}")
    return result.stdout.decode(errors="replace").strip()


@functools.cache
def _relay_program() -> bytes:
    """``kvmlab-echo`` (kvmlab-dirty, static), gzipped, for a peer whose image has none."""
    with tempfile.TemporaryDirectory(prefix="kvmlab-relay-") as tmp:
        return gzip.compress(compile_dirty(Path(tmp)), compresslevel=6)


def _relay_version() -> str:
    """The relay program's directory name in the peer: the hash of its source."""
    return hashlib.sha256(dirty_source().encode()).hexdigest()[:16]


def _install(peer: Machine, path: str) -> None:
    """The relay program copied into the peer at ``path`` (through its agent)."""
    data = _relay_program()
    done = peer.exec(["sh", "-c", INSTALL_RELAY, "sh", path], timeout=300, input=data)
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()
        raise RuntimeFailure(f"{peer.config.name}: cannot copy the relay to {path}: {why}")


def _guest_counts(machine: Machine, dev: str) -> tuple[int, int]:
    """The guest NIC's received and sent packets (kernel counters: they move with it)."""
    rx, tx = _guest_sh(machine, GUEST_COUNTERS, dev).split()
    return int(rx), int(tx)


def switch_path(machine: Machine, guest_dir: Path, record: GuestRecord) -> SwitchPath | str | None:
    """The packet-path probe of a guest on its lab's switch (``kvmlab.migrate``'s
    ``PathProbeFactory``):
    None when the guest has no switch port, a reason when its path cannot be probed."""
    root = LabDir.of(record.lab).root / SWITCH_DIR
    switch_sockets = {
        nic.where: nic.mac
        for nic in record.nics
        if nic.kind == "vhost-user" and Path(nic.where).parent == root
    }
    if not switch_sockets:
        return None
    rec = read_record(root)
    if rec is None or not running(rec, root):
        return f"lab {record.lab}'s switch is not running"
    port = paired_port(rec.ports)
    mac = switch_sockets.get(str(root / f"{port}.sock")) if port else None
    if port is None or mac is None:
        return (
            "none of its switch ports is the generator port's neighbour (the PVP layout: "
            "a guest whose first two switch ports have no address)"
        )
    spec = SwitchSpec(kind=rec.kind)
    switch = Switch.attached(record.lab, spec, root)
    main = rec.main_core if rec.main_core is not None else 0
    core = rec.cores[0] if rec.cores else main
    if core == main:  # an older record, or one CPU for both: the idle main lcore needs another
        cpus = sorted(os.sched_getaffinity(0))
        core = next((c for c in cpus if c != main), main)
    work = guest_dir.parent / WORK_DIR
    return SwitchPath(machine, record.lab, switch, port, mac, work, (main, core))


def packet_path(
    machine: Machine, guest_dir: Path, record: GuestRecord
) -> SwitchPath | PeerPath | NetworkPath | str | None:
    """The packet path of a migrating guest (``kvmlab.migrate``'s ``PathProbeFactory``):
    its switch port when it has one (:func:`switch_path`), else its first tap on one of
    the lab's networks (:func:`network_path`); None when it has neither."""
    found = switch_path(machine, guest_dir, record)
    if isinstance(found, SwitchPath):
        return found
    on_network = network_path(machine, record)  # a switch port it cannot probe: this, then
    return on_network if on_network is not None else found


def network_path(machine: Machine, record: GuestRecord) -> PeerPath | NetworkPath | None:
    """The probe of a guest's first tap on one of the lab's networks: relayed by a peer
    guest on the same bridge when the lab runs one (:func:`network_peer`), else from the
    host's address on that network (the bridge, in the lab's namespace), to the guest's
    own address on it."""
    ns = namespaces.ns_name(record.lab, "net")
    tap = _network_tap(record)
    if tap is None or not namespaces.exists(ns):
        return None
    name, mac = tap
    direct = NetworkPath(machine, ns, mac)
    try:
        peer = network_peer(record, bridge_of(record.lab, name))
        if peer is None:
            return direct
        entry, peer_mac = peer
        assert entry.record is not None
        attached = backends.attach(entry.run_dir, entry.record)
    except KvmlabError:  # a peer's record that cannot be read: the host probes alone
        return direct
    return PeerPath(direct, attached, entry.name, peer_mac)


def _network_tap(record: GuestRecord) -> tuple[str, str] | None:
    """A guest's first tap on one of the lab's networks: (its name, its NIC's MAC)."""
    return next(
        (
            (nic.where, nic.mac)
            for nic in record.nics
            if nic.kind == "tap" and nic.where.startswith(TAP_PREFIXES)
        ),
        None,
    )


def network_peer(record: GuestRecord, bridge: str | None) -> tuple[GuestEntry, str] | None:
    """The first other running guest of the lab (its agent answers) with a tap on
    ``bridge``, and that NIC's MAC; None when the guest is alone there."""
    if bridge is None:
        return None
    for entry in LabDir.of(record.lab).live():
        other = entry.record
        if (
            other is None
            or list(entry.address) == list(record.address)
            or other.via is not None
            or not other.boots_image
            or entry.state() != "running"
        ):
            continue
        tap = _network_tap(other)
        if tap is not None and bridge_of(record.lab, tap[0]) == bridge:
            return entry, tap[1]
    return None


class NetworkPath:
    """Probes from the host's side of a lab network to the guest's address on it; the
    guest's NIC counts what reached it and what it sent back."""

    def __init__(self, machine: Machine, ns: str, mac: str) -> None:
        self.machine = machine
        self.ns = ns
        self.mac = mac.lower()
        self.description = f"host on the lab network ({ns}) -> bridge -> tap -> guest NIC {mac}"
        self.dev: str | None = None
        self.before: tuple[int, int] | None = None

    def start(self, progress: Progress) -> tuple[str, int, Callable[[], socket.socket]]:
        """The guest's address on the network, its echo started, its NIC counted."""
        dev, address = _guest_sh(self.machine, GUEST_ADDRESS, self.mac).split()
        self.dev = dev
        self.description += f" ({address}:{ECHO_PORT}) and back"
        self.machine.exec_background(["/bin/kvmlab-echo", str(ECHO_PORT)])
        self.before = _guest_counts(self.machine, dev)
        where = str(namespaces.NETNS_DIR / self.ns)
        return address, ECHO_PORT, lambda: socket_at(where)

    def count(self, guest: Machine) -> list[tuple[str, int]]:
        """What the guest's NIC received and sent since :meth:`start`."""
        assert self.dev is not None and self.before is not None
        rx, tx = _guest_counts(guest, self.dev)
        return [("guest in", rx - self.before[0]), ("guest out", tx - self.before[1])]

    def own_fault(self) -> None:
        """The host's side has no part of its own that fails apart from the guest's."""
        return None

    def close(self, guest: Machine | None) -> None:
        """The probe's echo stopped (the guest's address is its own: left as it is)."""
        if self.dev is not None and guest is not None:
            with contextlib.suppress(KvmlabError, OSError):
                _guest_sh(guest, KILL_ECHO, str(ECHO_PORT))
            self.dev = None


class PeerPath:
    """Probes from a peer guest on the guest's lab network: the host's prober (in the lab's
    namespace) sends to the peer's relay, which sends each probe on to the guest from its
    own address and each echo back. What crosses the guest's link is the peer's traffic,
    as an operator's ping from a neighbour would be; the gap the host times includes the
    peer's own relaying, which the baseline before the migration shows. The relay counts
    both ways, the guest's NIC what reached it and what it sent back.

    A peer whose relay cannot start (its port held, kvmlab's directory there taken) is
    left out: the probes then come from the host's address, as without a peer, and the
    path says why. A relay that dies, or a peer that drops its link, while the probes run
    is the path's own fault (:meth:`own_fault`), not the migrated guest's."""

    def __init__(self, direct: NetworkPath, peer: Machine, peer_name: str, peer_mac: str) -> None:
        self.direct = direct
        """The guest's side: its echo and NIC counts, and how the host probes it without
        the peer."""
        self.peer = peer
        self.peer_name = peer_name
        self.peer_mac = peer_mac.lower()
        self.description = f"host ({direct.ns}) -> peer guest {peer_name}"
        self._target: Target | None = None
        self._relaying = False
        self._without_peer: str | None = None
        """Why the probes come from the host instead (the relay did not start)."""

    def start(self, progress: Progress) -> Target:
        """The guest's echo and NIC counts (:class:`NetworkPath`), then the peer's relay;
        the peer's address, where the host's prober sends (the guest's own, from the
        host's address, when the relay cannot start)."""
        self._target = target = self.direct.start(progress)
        address = target[0]
        try:
            relay_at = self._start_relay(progress, address)
        except KvmlabError as exc:
            self._without_peer = f"{self.peer_name}'s relay did not start: {exc}"
            progress.step(f"packet path: probes from the host instead ({self._without_peer})")
            self.description = (
                f"{self.direct.description} (not from the peer guest: {self._without_peer})"
            )
            return target
        self.description += (
            f" (relay {relay_at}:{RELAY_PORT}) -> bridge -> tap -> guest NIC "
            f"{self.direct.mac} ({address}:{ECHO_PORT}) and back"
        )
        where = str(namespaces.NETNS_DIR / self.direct.ns)
        return relay_at, RELAY_PORT, lambda: socket_at(where)

    def _start_relay(self, progress: Progress, address: str) -> str:
        """The relay to ``address`` listening in the peer (copied there first when its
        image has none); the peer's address on the network."""
        peer = self.peer
        _, relay_at = _guest_sh(peer, GUEST_ADDRESS, self.peer_mac).split()
        progress.step(
            f"packet path: probes relayed by the peer guest {self.peer_name} ({relay_at})"
        )
        self._relaying = True  # from here on, close() stops it
        _guest_sh(peer, STOP_RELAY, str(RELAY_PORT), RELAY_DIR, "0")  # a killed run's
        program = _guest_sh(peer, PREPARE_RELAY, RELAY_DIR, RELAY_BIN, _relay_version())
        if program.startswith("copy "):
            program = program.removeprefix("copy ")
            progress.step(f"packet path: copying kvmlab's relay into the peer ({program})")
            _install(peer, program)
        wait = str(round(RELAY_START_S * max(1.0, peer.level_factor())))
        argv = [program, str(RELAY_PORT), address, str(ECHO_PORT), RELAY_COUNTS]
        _guest_sh(peer, START_RELAY, RELAY_DIR, wait, *argv)
        return relay_at

    def count(self, guest: Machine) -> list[tuple[str, int]]:
        """The relay's four counts (stopping it) around the guest NIC's two, in path order."""
        at_guest = self.direct.count(guest)
        if self._without_peer is not None:
            return at_guest
        wait = str(round(RELAY_WAIT_S * max(1.0, self.peer.level_factor())))
        counted = _guest_sh(self.peer, STOP_RELAY, str(RELAY_PORT), RELAY_DIR, wait)
        relayed, sent_on, back, home = (int(n) for n in counted.split())
        return [
            ("peer from host", relayed),
            ("peer to guest", sent_on),
            *at_guest,
            ("peer from guest", back),
            ("peer to host", home),
        ]

    def own_fault(self) -> tuple[str, Target] | None:
        """Why the path failed on the peer's side (its relay gone, its link down, its agent
        silent) and how to probe the guest without the peer; None when the peer's part
        still works (or there is no peer in the path)."""
        if self._without_peer is not None or self._target is None:
            return None
        try:
            relay, link = _guest_sh(self.peer, RELAY_HEALTH, str(RELAY_PORT), self.peer_mac).split()
        except (KvmlabError, OSError, ValueError) as exc:
            return f"the peer guest {self.peer_name} does not answer ({exc})", self._target
        if relay == "running" and link == "up":
            return None
        parts = [f"its relay {relay}"] if relay != "running" else []
        if link != "up":
            parts.append(f"its link {link}")
        return f"the peer guest {self.peer_name}'s part failed: {', '.join(parts)}", self._target

    def close(self, guest: Machine | None) -> None:
        """The guest's echo and the peer's relay stopped; the peer let go of."""
        self.direct.close(guest)
        if self._relaying:
            with contextlib.suppress(KvmlabError, OSError):
                _guest_sh(self.peer, STOP_RELAY, str(RELAY_PORT), RELAY_DIR, "0")
            self._relaying = False
        with contextlib.suppress(KvmlabError, OSError):
            self.peer.disconnect()


@dataclass
class _Before:
    """Every hop's counters before the first probe."""

    bridge: Snapshot
    switch: Snapshot
    guest: tuple[int, int]


class SwitchPath:
    """The probe of one guest's switch port (see the module doc)."""

    def __init__(
        self,
        machine: Machine,
        lab: str,
        switch: Switch,
        port: str,
        mac: str,
        work: Path,
        cores: tuple[int, int],
    ) -> None:
        self.machine = machine
        self.lab = lab
        self.switch = switch
        self.port = port
        self.mac = mac.lower()
        self.work = work
        self.cores = cores
        """(the switch's control CPU, where the bridge polls; its first forwarding CPU,
        where the bridge's idle main lcore sits), as kvmlab's PVP generator takes them."""
        self.description = (
            f"host -> testpmd bridge -> {switch.kind} switch port {port} -> guest NIC {mac} "
            f"({GUEST_IP}:{ECHO_PORT}) and back"
        )
        self.bridge: TestPmd | None = None
        self.dev: str | None = None
        self.before: _Before | None = None
        self._identity_before = ""
        self._prior = ("up", "-")
        """The NIC's link state and IPv6 setting before the probe (restored after)."""

    # --- set-up --------------------------------------------------------------------------

    def start(self, progress: Progress) -> tuple[str, int, Callable[[], socket.socket]]:
        """Bridge, tap, the guest's NIC addressed and its echo started, every hop counted;
        where the prober sends, and how it makes a socket in the bridge's namespace."""
        progress.step(
            f"packet path: bridging the switch's {GEN_PORT} to a tap, probing port {self.port}"
        )
        self._start_bridge()
        tap_mac = self._set_up_tap()
        machine = self.machine
        dev, up, ipv6 = _guest_sh(
            machine, GUEST_SETUP, self.mac, GUEST_IP, HOST_IP, tap_mac
        ).split()
        self.dev, self._prior = dev, (up, ipv6)
        machine.exec_background(["/bin/kvmlab-echo", str(ECHO_PORT)])
        self._identity_before = self._port_identity()
        self.before = _Before(
            self._bridge_counts(), self._switch_counts(), self._guest_counts(machine)
        )
        assert self.bridge is not None
        pid = self.bridge.pid
        return GUEST_IP, ECHO_PORT, lambda: socket_in(pid)

    def _start_bridge(self) -> None:
        if self.work.exists():
            remove_owned(self.work)  # a killed kvmlab's: its bridge died with it
        create_owned(self.work, f"packet-path probe of lab {self.lab}")
        control, forwarding = self.cores
        argv = bridge_argv(
            f"kvmlab-{self.lab}-pathprobe",
            self.switch.socket(GEN_PORT),
            TAP,
            core=control,
            main=forwarding,
            server=not self.switch.serves_sockets,
        )
        # at the lowest priority: it polls, and the migration it measures needs the CPUs
        niced = ["nice", "-n", "19", "unshare", "--net", "--", *argv]
        self.bridge = TestPmd("bridge", niced, self.work)
        self.bridge.start(READY_S)  # dies with kvmlab, and its namespace with it

    def _set_up_tap(self) -> str:
        assert self.bridge is not None
        enter = ["nsenter", "-t", str(self.bridge.pid), "--net", "--"]
        done = subprocess.run(
            [*enter, "sh", "-c", BRIDGE_SETUP, "sh", TAP, HOST_IP, GUEST_IP, self.mac],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        found = re.search(r"link/ether ([0-9a-f:]{17})", done.stdout)
        if done.returncode != 0 or found is None:
            raise RuntimeFailure(
                f"packet path: setting up the bridge's tap failed: {done.stderr.strip()}"
            )
        self.bridge.command("start")
        return found.group(1)

    # --- counting ------------------------------------------------------------------------

    def _port_identity(self) -> str:
        """Which port object carries the guest's port now: OVS's interface record (a port
        re-created on the destination's socket at the switch-over counts from 0 again);
        a testpmd port is the same throughout."""
        if self.switch.ovs is None:
            return self.port
        return self.switch.ovs.vsctl("get", "Interface", self.port, "_uuid", wait=False).strip()

    def _bridge_counts(self) -> Snapshot:
        assert self.bridge is not None
        return HostTestPmd("bridge", self.bridge).snapshot()

    def _switch_counts(self) -> Snapshot:
        return SwitchCounted(self.switch).snapshot()

    def _guest_counts(self, machine: Machine) -> tuple[int, int]:
        assert self.dev is not None
        return _guest_counts(machine, self.dev)

    def count(self, guest: Machine) -> list[tuple[str, int]]:
        """Every hop's packets since :meth:`start`, from the bridge's tap to the guest and
        back (the prober's own counts are the engine's)."""
        assert self.before is not None
        before = self.before
        bridge, switch = self._bridge_counts(), self._switch_counts()
        guest_rx, guest_tx = self._guest_counts(guest)
        ports = self.switch.ports
        gen, port = ports.index(GEN_PORT), ports.index(self.port)

        def delta(after: Snapshot, first: Snapshot, index: int, field: str) -> int:
            if index not in after.ports:
                raise RuntimeFailure(f"packet path: no counters of port {index} any more")
            now = getattr(after.ports[index], field)
            then = getattr(first.ports[index], field) if index in first.ports else 0
            return int(now - then)

        to_guest = delta(switch, before.switch, port, "tx_packets")
        from_guest = delta(switch, before.switch, port, "rx_packets")
        guest_port: list[tuple[str, int]] = [("switch to guest", to_guest)]
        back_port: list[tuple[str, int]] = [("switch from guest", from_guest)]
        if self._port_identity() != self._identity_before:
            # OVS re-created the port on the destination's socket: its counters began again
            self.description += (
                f"; switch port {self.port} re-created at the switch-over: its own counts "
                "left out (a loss there shows at 'guest in')"
            )
            guest_port, back_port = [], []
        return [
            ("bridge from host", delta(bridge, before.bridge, BRIDGE_TAP, "rx_packets")),
            ("bridge to switch", delta(bridge, before.bridge, BRIDGE_PORT, "tx_packets")),
            ("switch in", delta(switch, before.switch, gen, "rx_packets")),
            *guest_port,
            ("guest in", guest_rx - before.guest[0]),
            ("guest out", guest_tx - before.guest[1]),
            *back_port,
            ("switch out", delta(switch, before.switch, gen, "tx_packets")),
            ("bridge from switch", delta(bridge, before.bridge, BRIDGE_PORT, "rx_packets")),
            ("bridge to host", delta(bridge, before.bridge, BRIDGE_TAP, "tx_packets")),
        ]

    def own_fault(self) -> None:
        """Every part of this path but the guest's is the switch's and kvmlab's bridge's,
        which the hops place; none is judged apart."""
        return None

    # --- undo ----------------------------------------------------------------------------

    def close(self, guest: Machine | None) -> None:
        """The guest's NIC and echo back as they were (when a guest runs), the bridge
        stopped (its namespace goes with it), the work directory removed; each step tried
        whatever the one before did; safe to call twice."""
        if self.dev is not None and guest is not None:
            with contextlib.suppress(KvmlabError, OSError):
                _guest_sh(guest, KILL_ECHO, str(ECHO_PORT))
            with contextlib.suppress(KvmlabError, OSError):
                _guest_sh(guest, GUEST_UNDO, self.dev, GUEST_IP, HOST_IP, *self._prior)
        self.dev = None
        if self.bridge is not None:
            with contextlib.suppress(KvmlabError, OSError):
                self.bridge.stop()
            self.bridge = None
        if self.work.exists():
            with contextlib.suppress(StateError, OSError):
                remove_owned(self.work)
