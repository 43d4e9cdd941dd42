"""What watches the guest through a migration, each behind one interface
(:class:`Observer`): its heartbeats (the probe port's file on each side), the network
probe (UDP from this host through a port forward, echoed in the guest) and the packet-path
probe (UDP through its vswitch port or lab network, counted hop by hop). The engine
prepares them before the migration, has them measure the switch-over once the guest was
handed over, and undoes them where the guest runs then."""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import subprocess
import time
from dataclasses import dataclass
from typing import ClassVar

from kvmlab.errors import KvmlabError, RuntimeFailure
from kvmlab.migrate import guestside
from kvmlab.migrate.netprobe import GUEST_PORT, NetworkProbe, free_udp_port
from kvmlab.migrate.pathprobe import PathProbe, PathProbeFactory, Target
from kvmlab.migrate.probe import STEADY_CEILING_S, HeartbeatWatch, measure_downtime
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.transports.base import AnyTransport
from kvmlab.proc.signals import deferred_signals
from kvmlab.progress import QUIET, Progress
from kvmlab.runtime.machine import Machine


@dataclass(frozen=True)
class Window:
    """The instants of one migration (host monotonic clock) the measures need."""

    t_base: float
    """The observers' own noise is measured from here to :attr:`t0`."""
    t0: float
    """The migration started."""
    t_run: float
    """The destination was seen running the guest."""
    t_forwarded: float
    """The guest's address (its port forwards) had followed it."""
    factor: float
    """How much slower than the reference the destination runs (scales the ceilings)."""


class Observer(abc.ABC):
    """One way of watching the guest through a migration."""

    follows_guest: ClassVar[bool] = False
    """Whether undoing it needs the guest answering: then it is undone once the guest runs
    somewhere for sure (the destination, or the source backed out), not while a paused
    source holds it."""

    @abc.abstractmethod
    def prepare(self, outcome: Outcome, progress: Progress) -> bool:
        """Set it up before the migration; False when it cannot watch (why, in
        ``outcome``), having undone what it set up."""

    def begin(self) -> None:  # noqa: B027 (a hook: most start in prepare)
        """Start watching, at the baseline's start."""

    @abc.abstractmethod
    def measure(self, outcome: Outcome, window: Window, moved: Machine) -> None:
        """Once the guest was handed over: its figures (and checks) into ``outcome``."""

    def stop(self) -> None:  # noqa: B027 (a hook)
        """Stop watching (safe to call again)."""

    def close(self, guest: Machine | None) -> None:  # noqa: B027 (a hook)
        """Undo its set-up where the guest runs now (None: nothing runs it)."""


class Heartbeats(Observer):
    """The guest's heartbeats, written to its probe port, read on each side's file."""

    def __init__(self, transport: AnyTransport) -> None:
        self.files = transport.heartbeat_files()
        self.watch = HeartbeatWatch(self.files) if self.files else None
        self.progress: Progress = QUIET

    def prepare(self, outcome: Outcome, progress: Progress) -> bool:
        self.progress = progress
        return self.watch is not None

    def begin(self) -> None:
        if self.watch is not None:
            self.watch.start()

    def measure(self, outcome: Outcome, window: Window, moved: Machine) -> None:
        assert self.watch is not None
        self.progress.step("measuring the guest's downtime until its heartbeats are steady")
        ceiling = STEADY_CEILING_S * window.factor
        gap, base = measure_downtime(self.watch, window.t_base, window.t0, window.t_run, ceiling)
        outcome.guest_downtime_ms = gap.seconds * 1000 if gap else None
        outcome.baseline_gap_ms = base.seconds * 1000 if base else None
        self.watch.stop()

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()


class NetworkPath(Observer):
    """UDP probes from this host through a port forward of the guest's user network."""

    def __init__(self, transport: AnyTransport) -> None:
        self.transport = transport
        self.net: _NetProbe | None = None

    def prepare(self, outcome: Outcome, progress: Progress) -> bool:
        self.net = _start_network_probe(self.transport, outcome, progress)
        return self.net is not None

    def measure(self, outcome: Outcome, window: Window, moved: Machine) -> None:
        assert self.net is not None
        ceiling = STEADY_CEILING_S * window.factor
        probe = self.net.probe
        gap, base = measure_downtime(probe, window.t_base, window.t0, window.t_forwarded, ceiling)
        end = time.monotonic()
        outcome.network_downtime_ms = gap.seconds * 1000 if gap else None
        outcome.network_baseline_gap_ms = base.seconds * 1000 if base else None
        loss = probe.loss(window.t0, end)
        outcome.network_probes = (loss.sent, loss.lost)

    def stop(self) -> None:
        if self.net is not None:
            self.net.probe.stop()

    def close(self, guest: Machine | None) -> None:
        if self.net is not None and guest is not None:
            _stop_network_probe(self.transport, self.net, guest)


class PacketPath(Observer):
    """The guest's packet path (its vswitch port or lab network), probed hop by hop."""

    follows_guest = True

    def __init__(self, factory: PathProbeFactory | None, transport: AnyTransport) -> None:
        self.factory, self.transport = factory, transport
        self.path: _PathRun | None = None

    def prepare(self, outcome: Outcome, progress: Progress) -> bool:
        self.path = _start_path_probe(self.factory, self.transport, outcome, progress)
        return self.path is not None

    def measure(self, outcome: Outcome, window: Window, moved: Machine) -> None:
        assert self.path is not None
        ceiling = PATH_CEILING_S * window.factor
        _measure_path(self.path, outcome, window.t_base, window.t0, window.t_run, ceiling, moved)

    def stop(self) -> None:
        if self.path is not None:
            self.path.prober.stop()

    def close(self, guest: Machine | None) -> None:
        if self.path is not None:
            _close_path(self.path, guest)


def _close_path(path: _PathRun, guest: Machine | None) -> None:
    """Undo the packet-path probe (in ``guest`` too, when one runs it), whatever arrives."""
    with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
        path.probe.close(guest)


@dataclass(frozen=True)
class _NetProbe:
    """The network probe of one migration: the host's prober, the forward it goes
    through (netdev id, hostfwd rule on the source, and on the destination), the echo's
    pid in the guest and where the probes go once the guest runs on the destination."""

    probe: NetworkProbe
    netdev: str
    rule: str
    dest_rule: str
    echo_pid: int
    early: bool
    """Whether the destination (on another host) held its forward from its start: then
    both paths are probed throughout, and the guest answers on whichever it runs."""


ECHO_WAIT_S = 10.0
"""How long the first echo may take once the echo holds its port in the guest (times the
guest's slowness)."""


def _start_network_probe(
    transport: AnyTransport, outcome: Outcome, progress: Progress
) -> _NetProbe | None:
    """UDP probes from this host to the guest through a port forward on its user network,
    echoed there. Where the backend can give the destination a forward of its own from its
    start (another port on this host, the same one on another host), every probe goes both
    ways and the guest answers where it runs; otherwise (one host, QEMU's own migration)
    the forward moves to the destination with the lab's own, once the source lets go of
    it. None (and why, in ``outcome``) when no probe can reach the guest, or no echo came."""
    route = transport.probe_route()
    if isinstance(route, str):
        outcome.network_path = route
        return None
    netdev, there = route
    remote = there != "127.0.0.1"
    port = free_udp_port()
    rule = f"udp:127.0.0.1:{port}-:{GUEST_PORT}"
    dest_port = port if remote else free_udp_port()
    own_rule = f"udp:{there}:{dest_port}-:{GUEST_PORT}"
    transport.source.monitor().add_forward(netdev, rule)
    echo = guestside.start_echo(transport.source, GUEST_PORT)
    probe = NetworkProbe("127.0.0.1", port).start()
    net = _NetProbe(probe, netdev, rule, rule, echo, False)
    why = guestside.wait_echo_bound(transport.source, GUEST_PORT, echo)
    wait = ECHO_WAIT_S * max(1.0, transport.level_factor())
    deadline = time.monotonic() + wait
    while why is None and not net.probe.arrivals and time.monotonic() < deadline:
        time.sleep(0.05)
    early = False
    if why is None and not net.probe.arrivals:
        why = (
            f"no echo came back through {rule} in {wait:.0f} s, "
            "though the echo in the guest holds its port"
        )
    elif why is None and transport.forward_from_start(netdev, own_rule):
        early = True
        net = dataclasses.replace(net, dest_rule=own_rule, early=True)
        try:
            probe.add_target(there, dest_port)
        except OSError as exc:
            why = f"no route to {there} for the probe: {exc}"
    elif why is None and remote:
        why = "the destination's user network takes no forward at its start"
    if why is not None:
        _stop_network_probe(transport, net, transport.source)
        outcome.network_path = why
        return None
    if not early:
        transport.forwards.append((netdev, rule))
    where = "the destination's host" if remote else "the destination"
    both = f" and {there}:{dest_port} on {where}" if early else ""
    outcome.network_path = (
        f"udp 127.0.0.1:{port}{both} -> guest port {GUEST_PORT}, its user network"
    )
    progress.step(f"network probe: UDP at 1 kHz to 127.0.0.1:{port}{both}, echoed in the guest")
    return net


def _stop_network_probe(transport: AnyTransport, net: _NetProbe, machine: Machine) -> None:
    """Stop probing; remove the forward and the echo where the guest runs now."""
    net.probe.stop()
    rule = net.rule if machine is transport.source else net.dest_rule
    host_side = rule.split("-", 1)[0]  # udp:ADDRESS:PORT
    with contextlib.suppress(KvmlabError):
        machine.monitor().remove_forward(net.netdev, host_side)
    with contextlib.suppress(KvmlabError):
        guestside.stop_echo(machine, net.echo_pid)


@dataclass(frozen=True)
class _PathRun:
    """A packet-path probe that started, and its prober."""

    probe: PathProbe
    prober: NetworkProbe


def _start_path_probe(
    factory: PathProbeFactory | None, transport: AnyTransport, outcome: Outcome, progress: Progress
) -> _PathRun | None:
    """The guest's packet path set up and probed, when it has one; None (and why, in
    ``outcome``) when it has none, it cannot be probed or no echo came back."""
    if factory is None:
        return None
    made = factory(transport.source, transport.guest_dir, transport.record)
    if made is None:
        return None
    if isinstance(made, str):
        outcome.packet_path = f"not probed: {made}"
        progress.step(f"packet path: not probed ({made})")
        return None
    prober: NetworkProbe | None = None
    wait = ECHO_WAIT_S * max(1.0, transport.level_factor())
    try:
        host, port, make_socket = made.start(progress)
        prober = NetworkProbe(host, port, make_socket).start()
        deadline = time.monotonic() + wait
        while not prober.arrivals and time.monotonic() < deadline:
            time.sleep(0.05)
        if not prober.arrivals:
            raise RuntimeFailure(f"no echo came back from {host}:{port} in {wait:.0f} s")
    except BaseException as exc:  # a Ctrl-C too: nothing of a half-made path stays
        with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
            if prober is not None:
                prober.stop()
            made.close(transport.source)
        if not isinstance(exc, (KvmlabError, OSError, subprocess.SubprocessError)):
            raise
        outcome.packet_path = f"{made.description}: not probed: {exc}"
        progress.step(f"packet path: not probed ({exc})")
        return None
    outcome.packet_path = made.description
    progress.step(f"packet path: UDP at 1 kHz, {made.description}")
    return _PathRun(made, prober)


PATH_CEILING_S = 10.0
"""How long after the guest runs on the destination its packet path may stay silent
before the gap's window closes (scaled by the guest's slowness): by then the heartbeats
and the network probe have seen the guest steady, and a path still silent is broken (its
check fails)."""
PATH_CHECK_S = 1.0
"""The packet path works on the destination when echoes came in its last second of
probing (once the gap's window closed: steady, or at its ceiling)."""


def _path_check(prober: NetworkProbe, t_run: float, stopped: float) -> guestside.Check:
    """Whether the guest answers on its packet path from the destination (a NIC left off
    its bridge, or a switch that forwards to the gone source, has it answer no more)."""
    arrivals = list(prober.arrivals)
    after = [t for t in arrivals if t > t_run]
    recent = sum(1 for t in after if t >= stopped - PATH_CHECK_S)
    if recent:
        return guestside.Check(
            "packet path",
            True,
            f"{recent} echoes in the last {PATH_CHECK_S:g} s of probing, "
            f"{len(after)} since the guest ran on the destination",
        )
    last = (
        f"the last came {stopped - arrivals[-1]:.1f} s before the probing stopped"
        if arrivals
        else "none came at all"
    )
    return guestside.Check(
        "packet path",
        False,
        f"no echo in the last {PATH_CHECK_S:g} s of probing ({len(after)} since the guest "
        f"ran on the destination; {last})",
    )


PATH_DRAIN_S = 0.5
"""After the last probe: what is still in the path's rings arrives (1 ms apart, rings of
hundreds: well under this)."""


def _measure_path(
    path: _PathRun,
    outcome: Outcome,
    t_base: float,
    t0: float,
    t_run: float,
    ceiling: float,
    moved: Machine,
) -> None:
    """The packet path's gap and loss around the switch-over, then every hop's count."""
    prober = path.prober
    gap, base = measure_downtime(prober, t_base, t0, t_run, ceiling)
    stopped = time.monotonic()
    check = _path_check(prober, t_run, stopped)
    # the guest's fault, or a part of the probe's own? (asked before counting stops it)
    fault = _own_fault(path.probe) if not check.ok else None
    prober.stop_sending()
    time.sleep(PATH_DRAIN_S)  # the echoes still on their way come back and are counted
    loss = prober.loss(t0, stopped)
    outcome.packet_downtime_ms = gap.seconds * 1000 if gap else None
    outcome.packet_baseline_gap_ms = base.seconds * 1000 if base else None
    outcome.packet_probes = (loss.sent, loss.lost)
    hops: list[tuple[str, int]] | None = None
    try:
        try:
            hops = path.probe.count(moved)
        finally:
            prober.stop()
    except (KvmlabError, OSError, LookupError, ValueError) as exc:  # the gap stands
        outcome.packet_path = f"{outcome.packet_path}; its hops not counted: {exc}"
    if fault is not None:  # after the counts: its probes are not in them
        check = _judged_apart(fault, check)
    outcome.checks_after.append(check)
    if hops is not None:
        sent = len(prober.sent) - len(prober.unsent)  # a probe the host refused never left
        outcome.packet_hops = [("sent", sent), *hops, ("echoed", prober.echoes)]
        outcome.packet_path = path.probe.description  # what counting found is said there
    if fault is not None:
        outcome.packet_path = f"{outcome.packet_path}; {fault[0]}"
    if fault is not None and fault[1] is not None:  # the gap and loss are that part's
        outcome.packet_not_measured = f"the probe's own part failed: {fault[0]}"
        outcome.packet_downtime_ms = outcome.packet_probes = None


DIRECT_S = 1.0
"""How long a guest is probed without the part of the path that failed (at 1 kHz)."""

_Fault = tuple[str, "Target | None"]


def _own_fault(probe: PathProbe) -> _Fault | None:
    """Why the path failed on the probe's own side and where to probe the guest without
    it (None when its parts cannot be checked: the check then fails as it stands and the
    gap is kept, as nothing tells whose it is); None when the probe's own parts work, so
    the failure is the guest's."""
    try:
        return probe.own_fault()
    except (KvmlabError, OSError) as exc:
        return f"the probe's own parts could not be checked: {exc}", None


def _judged_apart(fault: _Fault, failed: guestside.Check) -> guestside.Check:
    """A path that stopped answering because a part of the probe's own failed (a peer
    guest's relay, its link) says nothing of the guest: the guest is probed without that
    part, and that decides the check."""
    why, target = fault
    if target is None:
        return guestside.Check("packet path", False, f"{failed.evidence}; {why}")
    host, port, make_socket = target
    direct = NetworkProbe(host, port, make_socket)
    try:
        direct.start()
        time.sleep(DIRECT_S)
        direct.stop_sending()
        time.sleep(PATH_DRAIN_S)
    except OSError as exc:
        evidence = f"{why}; the guest could not be probed without it: {exc}"
        return guestside.Check("packet path", False, evidence)
    finally:
        direct.stop()
    sent, echoes = len(direct.sent), direct.echoes
    if echoes:
        evidence = (
            f"{why}: the path's loss is there, not the guest's; probed at {host}:{port} "
            f"without it, the guest echoed {echoes} of {sent} probes in {DIRECT_S:g} s"
        )
        return guestside.Check("packet path", True, evidence)
    evidence = (
        f"{why}; probed at {host}:{port} without it, the guest echoed none of {sent} "
        f"probes in {DIRECT_S:g} s either"
    )
    return guestside.Check("packet path", False, evidence)
