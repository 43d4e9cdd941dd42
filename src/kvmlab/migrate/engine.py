"""One live migration of a running guest, from the dirtying workload to the verdict, for
every backend (each moves the guest through its transport, :mod:`.transports`).

The source keeps running and intact whatever happens before the switch-over: a
destination that fails to start or dies, or a cut connection, leaves the source running, a
timeout or Ctrl-C cancels, and kvmlab checks the source again. Past the point of no return
(postcopy started, or the switch-over done) nothing is undone: kvmlab lets the job finish
and hands the guest over. After a completed migration the guest is verified where it runs
now: a guest that fails any check is reported FAILED with the evidence.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from kvmlab.errors import KvmlabError, RuntimeFailure
from kvmlab.migrate import guestside
from kvmlab.migrate.engine_common import (
    DEFAULT_WORKLOAD,
    Baseline,
    Workload,
    check_fits,
    restore_forwards,
    running_source,
    start_workload,
    verify_after,
)
from kvmlab.migrate.modes import AUTO_PASSES, Settings, check_settings
from kvmlab.migrate.netprobe import GUEST_PORT, NetworkProbe, free_udp_port
from kvmlab.migrate.pathprobe import PathProbe, PathProbeFactory, Target
from kvmlab.migrate.probe import STEADY_CEILING_S, HeartbeatWatch, measure_downtime
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import FINISHED, Sample, parse
from kvmlab.migrate.transports import transport_for
from kvmlab.migrate.transports.base import ON_THIS_HOST, Refused, Route, Transport
from kvmlab.proc.signals import deferred_signals
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord

Progress = Callable[[str], None]
FINAL_TIMES_S = 3.0
"""How long a completed job's final times are waited for (see :func:`_final_times`)."""
CANCEL_S = 60.0
"""How long a cancelled job may take to end."""


def migrate(
    address: str,
    settings: Settings,
    workload: Workload = DEFAULT_WORKLOAD,
    progress: Progress = lambda _: None,
    route: Route = ON_THIS_HOST,
    auto_reason: str | None = None,
    path_probe: PathProbeFactory | None = None,
) -> Outcome:
    """Migrate the running guest at ``address`` along ``route`` and verify it; the
    outcome, whatever it is.

    ``path_probe``: how to probe the guest's packet path (:mod:`.pathprobe`), when it has
    one.

    ``auto_reason``: this migration is ``auto``'s (:mod:`.autochoice`): with a fixed mode in
    ``settings``, why ``auto`` chose it; with mode ``auto``, why it falls back to its
    in-flight rule. Either way the outcome's ``choice`` says it.

    Raises only for what stops the attempt before the migration starts (bad input, a
    guest that is not running or not migratable, a destination that does not start).
    """
    if auto_reason is not None:  # first: a refusal of what auto chose says it was auto's
        progress(f"auto: {auto_reason}")
    check_settings(settings)
    route.check()
    lab_dir, _, _ = running_source(address)  # checked before the lock, which creates the lab dir
    with lab_dir.locked():
        _, guest_dir, record = running_source(address)  # again: another command may have changed it
        source = backends.attach(guest_dir, record)
        try:
            transport = transport_for(source, guest_dir, record, settings, route)
            try:
                return _migrate(transport, address, workload, progress, auto_reason, path_probe)
            finally:
                transport.close()
        finally:
            source.disconnect()  # every session closes, whatever ended the attempt


def _migrate(
    transport: Transport,
    address: str,
    workload: Workload,
    progress: Progress,
    auto_reason: str | None,
    path_probe: PathProbeFactory | None = None,
) -> Outcome:
    t_start = time.monotonic()
    check_fits(workload, transport.record, address)
    transport.prepare(progress)
    chosen = auto_reason is not None and transport.settings.mode != "auto"
    outcome = Outcome(
        address,
        f"auto: {transport.describe()}" if chosen else transport.describe(),
        dirty_mib=workload.mem_mib,
        dirty_rate_mibs=workload.rate_mibs,
        source_qemu=transport.source_name,
        dest_qemu=transport.dest_name,
        choice=auto_reason,
    )
    ref = start_workload(
        transport.source, address, workload, outcome, progress, transport.copied_disks()
    )
    try:
        _attempt(transport, outcome, ref, progress, path_probe)
    except BaseException:  # what _attempt does not handle: nothing of it may run on
        with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
            guestside.stop_dirtier(_guest_now(transport), ref.dirtier)
        with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
            transport.discard()
        raise
    outcome.wall_seconds = time.monotonic() - t_start
    return outcome


def _guest_now(transport: Transport) -> Machine:
    """The guest wherever its record says it runs now."""
    guest_dir = transport.guest_dir
    return backends.attach(guest_dir, GuestRecord.read(guest_dir))


class _Unfinished(Exception):
    """The migration ended without completing (failed or cancelled)."""


def _attempt(
    transport: Transport,
    outcome: Outcome,
    ref: Baseline,
    progress: Progress,
    path_probe: PathProbeFactory | None = None,
) -> None:
    """Open the destination, migrate, hand over or back out; verify where the guest runs."""
    settings = transport.settings
    moved: Machine | None = None
    started = False
    files = transport.heartbeat_files()
    watch = HeartbeatWatch(files) if files else None
    net: _NetProbe | None = None
    path: _PathRun | None = None
    t0 = time.monotonic()
    try:
        transport.open(progress)
        net = _start_network_probe(transport, outcome, progress)
        path = _start_path_probe(path_probe, transport, outcome, progress)
        t_base = time.monotonic()
        if watch is not None:
            watch.start()
        if watch is not None or net is not None or path is not None:
            time.sleep(1.0)  # the heartbeats' and the probes' own noise, before the migration
        progress(f"migrating {outcome.address} ({outcome.plan})")
        t0 = time.monotonic()
        transport.start(progress)
        started = True
        _follow(transport, outcome, t0, progress)
        if outcome.status != "completed":
            raise _Unfinished()
        if settings.mode == "auto" and outcome.postcopy_started is None:
            outcome.choice = _fallback(
                outcome.choice,
                f"precopy converged within {AUTO_PASSES} passes under the "
                f"{transport.downtime_target_ms()} ms target",
            )
        t_run = transport.destination_running()
        # the address first (the source's port forwards move only once it has let go of
        # them: a user of the guest's forwarded ports waits for that, not for a measure)
        progress("switched over: letting the source go, handing the address over")
        moved = transport.hand_over()
        _after_hand_over(transport, moved, outcome)
        t_forwarded = time.monotonic()
        ceiling = STEADY_CEILING_S * transport.level_factor()
        if watch is not None:
            progress("measuring the guest's downtime until its heartbeats are steady")
            gap, base = measure_downtime(watch, t_base, t0, t_run, ceiling)
            outcome.guest_downtime_ms = gap.seconds * 1000 if gap else None
            outcome.baseline_gap_ms = base.seconds * 1000 if base else None
            watch.stop()
        if net is not None:
            gap, base = measure_downtime(net.probe, t_base, t0, t_forwarded, ceiling)
            end = time.monotonic()
            outcome.network_downtime_ms = gap.seconds * 1000 if gap else None
            outcome.network_baseline_gap_ms = base.seconds * 1000 if base else None
            loss = net.probe.loss(t0, end)
            outcome.network_probes = (loss.sent, loss.lost)
        if path is not None:
            path_ceiling = PATH_CEILING_S * transport.level_factor()
            _measure_path(path, outcome, t_base, t0, t_run, path_ceiling, moved)
    except _Unfinished:
        pass
    except (KeyboardInterrupt, KvmlabError) as exc:
        if watch is not None:
            watch.stop()
        moved = _interrupted(transport, outcome, exc, moved, started, t0, progress)
    except BaseException:  # what ends the attempt unhandled: the path is undone first
        if path is not None:
            path.prober.stop()
            _close_path(path, moved or transport.source)
            path = None
        raise
    finally:
        if watch is not None:
            watch.stop()
        if net is not None:
            with deferred_signals():
                _stop_network_probe(transport, net, moved or transport.source)
        if path is not None:
            path.prober.stop()
            if moved is not None:
                _close_path(path, moved)
                path = None  # else: once the source is back (a paused one cannot answer)
    if moved is None and outcome.lost:
        outcome.checks_after = [
            guestside.Check("destination", False, transport.destination_evidence())
        ]
        if path is not None:
            _close_path(path, None)  # nothing runs the guest: the host's side only
        transport.abandon()
        return
    if moved is None:
        with deferred_signals():  # a second Ctrl-C does not leave the destination behind
            source = transport.back_out(outcome, progress)
        if path is not None:
            _close_path(path, source)
        _verify(source, ref, outcome, "source")
        return
    _verify(moved, ref, outcome, "destination")


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
"""How long the first echo may take once the probe starts (times the guest's slowness)."""


def _start_network_probe(
    transport: Transport, outcome: Outcome, progress: Progress
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
    transport.hmp(transport.source, f"hostfwd_add {netdev} {rule}")
    echo = guestside.start_echo(transport.source, GUEST_PORT)
    probe = NetworkProbe("127.0.0.1", port).start()
    net = _NetProbe(probe, netdev, rule, rule, echo, False)
    deadline = time.monotonic() + ECHO_WAIT_S * max(1.0, transport.level_factor())
    while not net.probe.arrivals and time.monotonic() < deadline:
        time.sleep(0.05)
    why = None
    early = False
    if not net.probe.arrivals:
        why = f"no echo came back through {rule} in {ECHO_WAIT_S:g} s"
    elif transport.forward_from_start(netdev, own_rule):
        early = True
        net = dataclasses.replace(net, dest_rule=own_rule, early=True)
        try:
            probe.add_target(there, dest_port)
        except OSError as exc:
            why = f"no route to {there} for the probe: {exc}"
    elif remote:
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
    progress(f"network probe: UDP at 1 kHz to 127.0.0.1:{port}{both}, echoed in the guest")
    return net


def _stop_network_probe(transport: Transport, net: _NetProbe, machine: Machine) -> None:
    """Stop probing; remove the forward and the echo where the guest runs now."""
    net.probe.stop()
    rule = net.rule if machine is transport.source else net.dest_rule
    host_side = rule.split("-", 1)[0]  # udp:ADDRESS:PORT
    with contextlib.suppress(KvmlabError):
        transport.hmp(machine, f"hostfwd_remove {net.netdev} {host_side}")
    with contextlib.suppress(KvmlabError):
        guestside.stop_echo(machine, net.echo_pid)


@dataclass(frozen=True)
class _PathRun:
    """A packet-path probe that started, and its prober."""

    probe: PathProbe
    prober: NetworkProbe


def _start_path_probe(
    factory: PathProbeFactory | None, transport: Transport, outcome: Outcome, progress: Progress
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
        progress(f"packet path: not probed ({made})")
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
        progress(f"packet path: not probed ({exc})")
        return None
    outcome.packet_path = made.description
    progress(f"packet path: UDP at 1 kHz, {made.description}")
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


def _after_hand_over(transport: Transport, moved: Machine, outcome: Outcome) -> None:
    """The source's port forwards on the destination, and the backend's own report."""
    outcome.checks_after.extend(
        restore_forwards(lambda c: transport.hmp(moved, c), transport.forwards)
    )
    transport.after_hand_over(moved, outcome)


def _interrupted(
    transport: Transport,
    outcome: Outcome,
    exc: BaseException,
    moved: Machine | None,
    started: bool,
    t0: float,
    progress: Progress,
) -> Machine | None:
    """Ctrl-C or a failure during the job: note why; past the point of no return let the job
    finish and hand the guest over, else cancel it (a job never started has nothing to
    cancel). The guest's machine when it moved."""
    alive = transport.destination_alive()
    if isinstance(exc, KeyboardInterrupt):
        outcome.cancelled = "interrupted (Ctrl-C, SIGTERM or SIGHUP)"
        outcome.interrupted = True
    elif outcome.status == "completed" and alive is False:
        outcome.error = "the destination QEMU exited after the switch-over (see the checks)"
    else:
        outcome.error = outcome.error or str(exc)
    with deferred_signals():
        if started and moved is None and outcome.status not in FINISHED and not outcome.lost:
            if outcome.postcopy_started is not None and alive is not False:
                progress("postcopy cannot be cancelled: letting it finish first")
            elif outcome.postcopy_started is None:
                state = outcome.status
                said = "before QEMU reported it" if state == "none" else f"QEMU's state: {state}"
                progress(f"cancelling the migration ({said})")
                with contextlib.suppress(KvmlabError):
                    transport.cancel()
            with contextlib.suppress(KvmlabError):
                _follow(transport, outcome, t0, progress, steer=False)
        if (
            moved is None
            and outcome.status == "completed"
            and transport.destination_alive() is not False
        ):
            progress("the migration had completed: handing the guest over to the destination")
            with contextlib.suppress(KvmlabError):
                moved = transport.hand_over()
                _after_hand_over(transport, moved, outcome)
    if outcome.status == "completed" and moved is None:
        # switched over, then the destination failed: that is the verdict's evidence
        outcome.checks_after = [
            guestside.Check("destination", False, f"{exc}; {transport.destination_evidence()}")
        ]
    return moved


def _verify(machine: Machine, ref: Baseline, outcome: Outcome, side: str) -> None:
    """Every check of the guest where it runs now; its dirtier stopped."""
    t_verify = time.monotonic()
    checks = verify_after(machine, ref.dirtier, ref.digest, ref.klines, side, ref.disks)
    if side == "source":
        outcome.source_checks = checks
    else:
        outcome.checks_after.extend(checks)
    outcome.verify_seconds += time.monotonic() - t_verify
    with contextlib.suppress(KvmlabError):
        if side == "destination":
            state = guestside.status(machine)
            outcome.guest_clock_gap_ms = state.get("maxgap_us", 0) / 1000
        guestside.stop_dirtier(machine, ref.dirtier)
    machine.disconnect()


def _follow(
    transport: Transport,
    outcome: Outcome,
    t0: float,
    progress: Progress,
    steer: bool = True,
) -> None:
    """Sample the job until it ends; start postcopy or cancel as planned (``steer``; a job
    being cancelled is only followed, for at most a minute, and one in postcopy until it
    ends: the guest is on both sides until then)."""
    settings = transport.settings
    last_pass = 0.0
    bounded = not steer and outcome.postcopy_started is None
    deadline = time.monotonic() + CANCEL_S if bounded else None
    cancelled_at: float | None = None
    unstuck = False
    while True:
        t = time.monotonic() - t0
        reply, job = transport.sample()
        if job:
            outcome.libvirt_samples.append({"t": t, **job})
        sample = parse(reply, t) if reply is not None else None
        sync = last_pass
        if sample is not None:
            outcome.raw_last = reply
            outcome.samples.append(sample)
            outcome.status = sample.status
            sync = sample.ram.get("dirty-sync-count", 0.0)
        ended = transport.ended()
        if ended is not None:
            outcome.status = ended.status
            if ended.error:
                outcome.error = ended.error
            if ended.status == "completed":
                _final_times(transport, outcome, t0)
            return
        if sync != last_pass and sample is not None:
            last_pass = sync
            progress(
                f"pass {sync:.0f} at {t:.1f} s: {sample.ram.get('remaining', 0) / 1048576:.0f}"
                f" MiB remaining, {sample.ram.get('mbps', 0):.0f} Mbit/s"
            )
        if steer and outcome.cancelled is None:
            _steer(transport, outcome, settings, t, sample, progress)
        if steer and outcome.cancelled is not None:
            cancelled_at = cancelled_at or time.monotonic()
            waited = time.monotonic() - cancelled_at
            if waited > CANCEL_S and not unstuck:
                unstuck = True
                done = transport.unstick()
                progress(
                    f"the job has not ended {waited:.0f} s after the cancel"
                    + (f": {done}" if done else "")
                )
            elif waited > 2 * CANCEL_S:
                outcome.error = (
                    f"the job did not end {waited:.0f} s after it was cancelled; "
                    f"{transport.describe()} may still hold the guest's domain"
                )
                return
        alive = transport.destination_alive()
        if alive is False and outcome.postcopy_started is None:
            outcome.error = outcome.error or "the destination QEMU exited during the migration"
        status = sample.status if sample is not None else None
        if outcome.postcopy_started is not None and (alive is False or status == "postcopy-paused"):
            # In postcopy the guest's state is split between the two: nothing can resume it.
            outcome.status = "failed"
            outcome.lost = True
            why = "its QEMU exited" if alive is False else f"postcopy stalled ({status})"
            outcome.error = (
                f"the destination failed during postcopy ({why}): the guest is "
                "lost (its memory was split between source and destination)"
            )
            return
        if deadline is not None and time.monotonic() > deadline:
            done = None if unstuck else transport.unstick()
            if done is None:
                return
            unstuck = True
            progress(f"the job has not ended {CANCEL_S:.0f} s after the cancel: {done}")
            deadline = time.monotonic() + CANCEL_S
        for event in transport.wait(transport.sample_s):
            outcome.events.append(
                {"t": time.monotonic() - t0, "event": event["event"], "data": event.get("data", {})}
            )


def _steer(
    transport: Transport,
    outcome: Outcome,
    settings: Settings,
    t: float,
    sample: Sample | None,
    progress: Progress,
) -> None:
    """The decisions during the job: postcopy after the pass asked for, ``auto`` after its
    passes, and what ``--max-time`` says once it has passed."""
    sync = sample.ram.get("dirty-sync-count", 0.0) if sample is not None else 0.0
    if outcome.postcopy_started is None and transport.can_postcopy:
        if settings.mode == "postcopy" and sync > settings.postcopy_after_pass:
            try:
                transport.start_postcopy()
            except Refused:
                pass  # too early for the backend: asked again at the next sample
            else:
                outcome.postcopy_started = t
                progress(f"switching to postcopy at {t:.1f} s (after pass {sync - 1:.0f})")
        elif settings.mode == "auto" and sync > AUTO_PASSES:
            transport.start_postcopy()
            outcome.postcopy_started = t
            expected = sample.times.get("expected-downtime", 0) if sample is not None else 0
            outcome.choice = _fallback(
                outcome.choice,
                f"precopy did not reach the {transport.downtime_target_ms()} ms target in "
                f"{AUTO_PASSES} passes (expected downtime {expected:.0f} ms): postcopy",
            )
            progress(f"auto: {outcome.choice} at {t:.1f} s")
    if t <= settings.max_seconds or outcome.postcopy_started is not None:
        return
    if settings.on_timeout == "postcopy" and transport.can_postcopy:
        try:
            transport.start_postcopy()
        except Refused as exc:
            outcome.cancelled = f"not converged in {settings.max_seconds:g} s, and {exc}"
        else:
            outcome.postcopy_started = t
            timed_out = (
                f"not converged in {settings.max_seconds:g} s: switched to "
                "postcopy (--on-timeout postcopy)"
            )
            outcome.choice = f"{outcome.choice}; then {timed_out}" if outcome.choice else timed_out
            progress(f"not converged in {settings.max_seconds:g} s: switching to postcopy")
            return
    else:
        outcome.cancelled = f"not converged in {settings.max_seconds:g} s"
    progress(f"{outcome.cancelled}: cancelling (the source keeps running)")
    transport.cancel()


def _fallback(why: str | None, rule: str) -> str:
    """``auto``'s choice by its in-flight rule, after why it had to use that rule."""
    return f"{why}; by QEMU's figures: {rule}" if why else rule


def _final_times(transport: Transport, outcome: Outcome, t0: float) -> None:
    """QEMU 7.2 reports ``completed`` before it has computed ``total-time`` and ``downtime``
    (both 0 until ``migration_calculate_complete`` runs a moment later): sample again until
    they are there, so a finished migration never reads as 0 ms (while the source's QEMU
    still answers; libvirt's completed job has its own times)."""
    deadline = time.monotonic() + FINAL_TIMES_S
    while (
        outcome.samples
        and not outcome.samples[-1].times.get("total-time")
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
        reply, _ = transport.sample()
        if reply is None:
            return
        outcome.samples.append(parse(reply, time.monotonic() - t0))
        outcome.raw_last = reply
