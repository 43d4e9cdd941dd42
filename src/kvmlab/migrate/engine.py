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
import time
from collections.abc import Callable

from kvmlab.errors import KvmlabError
from kvmlab.migrate import guestside
from kvmlab.migrate.job import fallback, follow
from kvmlab.migrate.modes import AUTO_PASSES, Settings, check_settings
from kvmlab.migrate.observers import Heartbeats, NetworkPath, Observer, PacketPath, Window
from kvmlab.migrate.pathprobe import PathProbeFactory
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import FINISHED
from kvmlab.migrate.switchover import compare_at_switchover
from kvmlab.migrate.transports import transport_for
from kvmlab.migrate.transports.base import ON_THIS_HOST, AnyTransport, Route
from kvmlab.migrate.workload import (
    DEFAULT_WORKLOAD,
    Baseline,
    Workload,
    check_fits,
    running_source,
    start_workload,
    verify_after,
)
from kvmlab.proc.signals import deferred_signals
from kvmlab.progress import QUIET, Progress
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord


def migrate(
    address: str,
    settings: Settings,
    workload: Workload = DEFAULT_WORKLOAD,
    progress: Progress = QUIET,
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
        progress.step(f"auto: {auto_reason}")
    check_settings(settings)
    route.check()
    lab_dir, _, _ = running_source(address)  # checked before the lock, which creates the lab dir
    with lab_dir.locked():
        _, guest_dir, record = running_source(address)  # again: another command may have changed it
        transport = transport_for(guest_dir, record, settings, route)  # attaches the source
        try:
            return _migrate(transport, address, workload, progress, auto_reason, path_probe)
        finally:
            try:
                transport.close()
            finally:
                transport.source.disconnect()  # every session closes, whatever ended it


def _migrate(
    transport: AnyTransport,
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


def _guest_now(transport: AnyTransport) -> Machine:
    """The guest wherever its record says it runs now."""
    guest_dir = transport.guest_dir
    return backends.attach(guest_dir, GuestRecord.read(guest_dir))


class _Unfinished(Exception):
    """The migration ended without completing (failed or cancelled)."""


def _attempt(
    transport: AnyTransport,
    outcome: Outcome,
    ref: Baseline,
    progress: Progress,
    path_probe: PathProbeFactory | None = None,
) -> None:
    """Open the destination, migrate, hand over or back out; verify where the guest runs."""
    observers: list[Observer] = [
        Heartbeats(transport),
        NetworkPath(transport),
        PacketPath(path_probe, transport),
    ]
    watching: list[Observer] = []  # prepared, not yet undone
    moved: Machine | None = None
    started = False
    t0 = time.monotonic()
    try:
        transport.open(progress)
        for observer in observers:
            if observer.prepare(outcome, progress):
                watching.append(observer)
        t_base = time.monotonic()
        for observer in watching:
            observer.begin()
        if watching:
            time.sleep(1.0)  # the observers' own noise, before the migration
        progress.step(f"migrating {outcome.address} ({outcome.plan})")
        t0 = time.monotonic()
        transport.start(progress)
        started = True
        follow(transport, outcome, t0, progress)
        if outcome.status != "completed":
            raise _Unfinished()
        if transport.settings.mode == "auto" and outcome.postcopy_started is None:
            outcome.choice = fallback(
                outcome.choice,
                f"precopy converged within {AUTO_PASSES} passes under the "
                f"{transport.downtime_target_ms()} ms target",
            )
        if transport.settings.compare_pages:
            compare_at_switchover(transport, outcome, progress)
        t_run = transport.destination_running()
        # the address first (the source's port forwards move only once it has let go of
        # them: a user of the guest's forwarded ports waits for that, not for a measure)
        progress.step("switched over: letting the source go, handing the address over")
        moved = transport.hand_over()
        _after_hand_over(transport, moved, outcome)
        window = Window(t_base, t0, t_run, time.monotonic(), transport.level_factor())
        for observer in watching:
            observer.measure(outcome, window, moved)
    except _Unfinished:
        pass
    except (KeyboardInterrupt, KvmlabError) as exc:
        for observer in watching:
            observer.stop()
        moved = _interrupted(transport, outcome, exc, moved, started, t0, progress)
    except BaseException:  # what ends the attempt unhandled: those that follow the guest first
        _undo(watching, moved or transport.source, lambda o: o.follows_guest)
        raise
    finally:
        for observer in watching:
            observer.stop()
        # the others now; those that need the guest once it runs somewhere for sure
        _undo(
            watching, moved or transport.source, lambda o: moved is not None or not o.follows_guest
        )
    if moved is None and outcome.lost:
        outcome.checks_after = [
            guestside.Check("destination", False, transport.destination_evidence())
        ]
        _undo(watching, None)  # nothing runs the guest: the host's side only
        transport.abandon()
        return
    if moved is None:
        with deferred_signals():  # a second Ctrl-C does not leave the destination behind
            source = transport.back_out(outcome, progress)
        _undo(watching, source)
        _verify(source, ref, outcome, "source")
        return
    _verify(moved, ref, outcome, "destination")


def _undo(
    watching: list[Observer],
    guest: Machine | None,
    which: Callable[[Observer], bool] = lambda _: True,
) -> None:
    """Undo ``which`` of the observers still set up (each once), where ``guest`` runs now."""
    for observer in [o for o in watching if which(o)]:
        watching.remove(observer)
        observer.stop()
        with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
            observer.close(guest)


def _after_hand_over(transport: AnyTransport, moved: Machine, outcome: Outcome) -> None:
    """The source's port forwards on the destination, and the backend's own report."""
    outcome.checks_after.extend(restore_forwards(moved, transport.forwards))
    transport.after_hand_over(moved, outcome)


def restore_forwards(moved: Machine, forwards: list[tuple[str, str]]) -> list[guestside.Check]:
    """The host port forwards the source held, now on the destination's user network; a
    failing check per rule that could not be restored.

    QEMU reports a failed bind only on its stderr, and the source's listening socket can
    outlive its process by a moment: each rule is checked in the monitor and added again
    until it is there (5 s at most)."""
    failed = []
    for netdev, rule in forwards:
        host_port = rule.split("-")[0].rsplit(":", 1)[-1]
        deadline = time.monotonic() + 5.0
        while True:
            try:
                monitor = moved.monitor()
                monitor.add_forward(netdev, rule)
                there = monitor.forwarding(host_port)
            except KvmlabError as exc:
                failed.append(guestside.Check("port forward", False, f"{rule}: {exc}"))
                break
            if there:
                break
            if time.monotonic() > deadline:
                failed.append(
                    guestside.Check(
                        "port forward",
                        False,
                        f"{rule} could not be set up on the destination (port in use?)",
                    )
                )
                break
            time.sleep(0.2)
    return failed


def _interrupted(
    transport: AnyTransport,
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
                progress.step("postcopy cannot be cancelled: letting it finish first")
            elif outcome.postcopy_started is None:
                state = outcome.status
                said = "before QEMU reported it" if state == "none" else f"QEMU's state: {state}"
                progress.step(f"cancelling the migration ({said})")
                with contextlib.suppress(KvmlabError):
                    transport.cancel()
            with contextlib.suppress(KvmlabError):
                follow(transport, outcome, t0, progress, steer=False)
        if (
            moved is None
            and outcome.status == "completed"
            and transport.destination_alive() is not False
        ):
            progress.step("the migration had completed: handing the guest over to the destination")
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
