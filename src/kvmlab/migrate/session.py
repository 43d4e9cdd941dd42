"""One live migration of a running guest, from the dirtying workload to the verdict.

The destination QEMU is the source's command line with its own run directory and
``-incoming defer`` (same devices by construction; :mod:`kvmlab.runtime.qemu.handover`). The
source keeps running and intact whatever happens before the switch-over: a destination
that fails to start, dies, or a cut connection leaves the source running (QEMU resumes
it), a timeout or Ctrl-C cancels (``migrate_cancel``), and kvmlab checks the source
again. After a completed migration the guest is verified on the destination: a guest
that fails is reported FAILED with the evidence.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kvmlab.errors import KvmlabError, QmpFailure, RuntimeFailure, StateError, UsageError, printable
from kvmlab.migrate import guestside
from kvmlab.migrate.engine_common import (
    DEFAULT_WORKLOAD,
    Baseline,
    Workload,
    check_fits,
    restore_forwards,
    running_source,
    serial_tail,
    start_workload,
    verify_after,
)
from kvmlab.migrate.modes import AUTO_PASSES, Plan, Settings, check_settings, plan
from kvmlab.migrate.probe import STEADY_CEILING_S, HeartbeatWatch, measure_downtime
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import FINISHED, parse
from kvmlab.proc.confined import remove_owned
from kvmlab.proc.processes import find_marked
from kvmlab.proc.signals import deferred_signals
from kvmlab.render.devices.control import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    PROBE_LOG,
    QMP_SOCKET,
)
from kvmlab.render.target import UNIX_PATH_MAX
from kvmlab.runtime import backends
from kvmlab.runtime.qemu import handover
from kvmlab.runtime.qemu.machine import QemuMachine, qemu_command
from kvmlab.runtime.qemu.qmp import QmpSession
from kvmlab.runtime.rundir import GuestRecord

Progress = Callable[[str], None]
SAMPLE_S = 0.1


def check_destination_sockets(address: str, dest_dir: Path) -> None:
    """Refuse, before anything starts, a destination directory so deep that its QMP,
    agent, console or migration socket would pass the unix socket limit (QEMU would fail to
    bind it half-way through the set-up)."""
    sockets = (QMP_SOCKET, AGENT_SOCKET, CONSOLE_SOCKET, "migrate.sock")
    longest = max((dest_dir / name for name in sockets), key=lambda p: len(os.fsencode(p)))
    size = len(os.fsencode(longest))
    if size > UNIX_PATH_MAX:
        over = size - UNIX_PATH_MAX
        raise StateError(
            f"cannot migrate {address}: its destination's socket {printable(str(longest))} "
            f"would be {size} bytes long, and a unix socket path takes at most "
            f"{UNIX_PATH_MAX}; bring the lab up under a KVMLAB_RUN_DIR {over} bytes shorter"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _attach_qemu(guest_dir: Path, record: GuestRecord) -> QemuMachine:
    """The guest on record as kvmlab's own QEMU: this engine drives QEMU's migration over
    QMP (a libvirt guest migrates through libvirt, :mod:`kvmlab.migrate.libvirt_migrate`)."""
    machine = backends.attach(guest_dir, record)
    if not isinstance(machine, QemuMachine):
        machine.disconnect()
        raise UsageError(
            f"{record.name} runs under {record.backend}, which migrates it itself: "
            "kvmlab migrate ADDRESS --to URI (the destination daemon)"
        )
    return machine


def _set(machine: QemuMachine, caps: dict[str, bool], params: dict[str, object]) -> None:
    if caps:
        machine.qmp().execute(
            "migrate-set-capabilities",
            {"capabilities": [{"capability": k, "state": v} for k, v in caps.items()]},
        )
    if params:
        machine.qmp().execute("migrate-set-parameters", params)


def migrate(
    address: str,
    settings: Settings,
    workload: Workload = DEFAULT_WORKLOAD,
    progress: Progress = lambda _: None,
    dest_qemu: str | None = None,
    transport: str = "tcp",
) -> Outcome:
    """Migrate the running guest at ``address`` and verify it; the outcome, whatever it is.

    Raises only for what stops the attempt before the migration starts (bad input, a
    guest that is not running or not migratable, a destination that does not start).
    """
    check_settings(settings)
    if transport not in ("tcp", "unix"):
        raise UsageError("--transport must be tcp or unix")
    lab_dir, _, _ = running_source(address)  # checked before the lock, which creates the lab dir
    with lab_dir.locked():
        _, guest_dir, record = running_source(address)  # again: another command may have changed it
        source = _attach_qemu(guest_dir, record)
        try:
            return _migrate(
                source,
                address,
                guest_dir,
                record,
                settings,
                workload,
                progress,
                dest_qemu,
                transport,
            )
        finally:
            source.disconnect()  # every QMP session closes, whatever ended the attempt


def _migrate(
    source: QemuMachine,
    address: str,
    guest_dir: Path,
    record: GuestRecord,
    settings: Settings,
    workload: Workload,
    progress: Progress,
    dest_qemu: str | None,
    transport: str,
) -> Outcome:
    t_start = time.monotonic()
    check_fits(workload, record, address)
    run_state = source.qmp().execute("query-status")
    if not run_state.get("running"):
        raise StateError(
            f"{address} is not running but {run_state.get('status')} (a failed "
            f"postcopy leaves its source so); 'kvmlab down {record.lab}' removes it"
        )
    dest_dir = handover.migration_dir(guest_dir, record)
    check_destination_sockets(address, dest_dir)
    if dest_dir.exists():
        if find_marked(f"{dest_dir}/"):
            raise StateError(
                f"a QEMU of an earlier migration of {address} still runs from "
                f"{dest_dir}; 'kvmlab down {record.lab}' stops it"
            )
        remove_owned(dest_dir)  # a failed attempt's leftovers
    argv, forwards = handover.destination_argv(record.argv, guest_dir, dest_dir, dest_qemu)
    offered = {c["capability"] for c in source.qmp().execute("query-migrate-capabilities")}
    the_plan = plan(settings, offered)
    outcome = Outcome(
        address,
        the_plan.describe(),
        dirty_mib=workload.mem_mib,
        dirty_rate_mibs=workload.rate_mibs,
        source_qemu=qemu_command(record.argv)[0],
        dest_qemu=qemu_command(argv)[0],
    )
    ref = start_workload(source, address, workload, outcome, progress)
    dirtier = ref.dirtier
    dest = QemuMachine(replace(source.config, argv=argv, run_dir=dest_dir))
    try:
        return _attempt(
            source,
            dest,
            forwards,
            guest_dir,
            record,
            the_plan,
            outcome,
            ref,
            progress,
            transport,
            t_start,
        )
    except BaseException:  # what _attempt does not handle: nothing of it may run on
        _stop_anyway(guest_dir, dirtier)
        with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
            if dest.is_alive() and GuestRecord.read(guest_dir).pid != dest.pid:
                dest.shutdown(force=True)  # never handed over: it is not the guest
                remove_owned(dest_dir)
        raise
    finally:
        dest.disconnect()


def _stop_anyway(guest_dir: Path, dirtier: guestside.Dirtier) -> None:
    """Stop kvmlab-dirty wherever the guest runs now (best effort, interrupts held)."""
    with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
        guestside.stop_dirtier(_attach_qemu(guest_dir, GuestRecord.read(guest_dir)), dirtier)


def _attempt(
    source: QemuMachine,
    dest: QemuMachine,
    forwards: list[tuple[str, str]],
    guest_dir: Path,
    record: GuestRecord,
    the_plan: Plan,
    outcome: Outcome,
    ref: Baseline,
    progress: Progress,
    transport: str,
    t_start: float,
) -> Outcome:
    """Start the destination, migrate, hand over or back out; verify where the guest runs."""
    dest_dir, settings = dest.run_dir, the_plan.settings
    dirtier, digest, klines = ref.dirtier, ref.digest, ref.klines
    adopted: GuestRecord | None = None
    watch = HeartbeatWatch([guest_dir / PROBE_LOG, dest_dir / PROBE_LOG])
    t0 = time.monotonic()
    try:
        progress(f"starting the destination QEMU ({dest_dir.name}, -incoming defer)")
        try:
            dest.launch_incoming()
        except KvmlabError as exc:
            lines = exc.lines()
            raise RuntimeFailure(
                f"the destination QEMU did not start: {lines[0]}"
                + "".join(f"; {x.strip()}" for x in lines[1:4])
            ) from exc
        _set(source, the_plan.source_caps, the_plan.source_params)
        _set(dest, the_plan.dest_caps, the_plan.dest_params)
        uri = (
            f"tcp:127.0.0.1:{_free_port()}"
            if transport == "tcp"
            else f"unix:{dest_dir / 'migrate.sock'}"
        )
        dest.qmp().execute("migrate-incoming", {"uri": uri})
        watch.start()
        time.sleep(1.0)
        t_base = time.monotonic() - 1.0
        progress(f"migrating over {uri} ({outcome.plan})")
        t0 = time.monotonic()
        source.qmp().execute("migrate", {"uri": uri})
        _follow(source, dest, the_plan, outcome, t0, progress)
        if outcome.status != "completed":
            raise _Unfinished()
        if settings.mode == "auto" and outcome.postcopy_started is None:
            outcome.choice = (
                f"precopy converged within {AUTO_PASSES} passes under the "
                f"{the_plan.source_params['downtime-limit']} ms target"
            )
        t_run = _wait_running(dest, outcome)
        progress(
            "the destination runs the guest: measuring its downtime until its heartbeats are steady"
        )
        ceiling = STEADY_CEILING_S * dest.level_factor()
        gap, base = measure_downtime(watch, t_base, t0, t_run, ceiling)
        outcome.guest_downtime_ms = gap.seconds * 1000 if gap else None
        outcome.baseline_gap_ms = base.seconds * 1000 if base else None
        watch.stop()
        progress("switched over: stopping the source QEMU, handing the address over")
        adopted = _hand_over(source, dest, guest_dir, record)
        outcome.checks_after.extend(restore_forwards(lambda c: hmp(dest, c), forwards))
    except _Unfinished:
        pass
    except (KeyboardInterrupt, KvmlabError) as exc:
        watch.stop()
        if isinstance(exc, KeyboardInterrupt):
            outcome.cancelled = "interrupted (Ctrl-C, SIGTERM or SIGHUP)"
            outcome.interrupted = True
        elif outcome.status == "completed" and not dest.is_alive():
            outcome.error = "the destination QEMU exited after the switch-over (see the checks)"
        else:
            outcome.error = outcome.error or str(exc)
        # Past the point of no return (postcopy started, or completed) nothing is undone:
        # the destination holds the guest, so kvmlab finishes and hands over.
        with deferred_signals():
            if (
                adopted is None
                and outcome.postcopy_started is not None
                and dest.is_alive()
                and outcome.status not in FINISHED
                and not outcome.lost
            ):
                progress("postcopy cannot be cancelled: letting it finish first")
                with contextlib.suppress(KvmlabError):
                    _follow(source, dest, the_plan, outcome, t0, progress)
            if adopted is None and outcome.status == "completed" and dest.is_alive():
                progress("the migration had completed: handing the guest over to the destination")
                with contextlib.suppress(KvmlabError):
                    adopted = _hand_over(source, dest, guest_dir, record)
        if outcome.status == "completed" and adopted is None:
            # switched over, then the destination failed: that is the verdict's evidence
            outcome.checks_after = [
                guestside.Check("destination", False, f"{exc}; {serial_tail(dest_dir)}")
            ]
            _keep_log(dest_dir, guest_dir)
    finally:
        watch.stop()
    if adopted is None and outcome.lost:
        outcome.checks_after = [guestside.Check("destination", False, serial_tail(dest_dir))]
        _keep_log(dest_dir, guest_dir)
        dest.shutdown(force=True)
        remove_owned(dest_dir)
        source.detach()  # paused, holding half a guest: 'kvmlab down' removes it
        outcome.wall_seconds = time.monotonic() - t_start
        return outcome
    if adopted is None:
        if dest.is_alive() or dest_dir.exists():
            with deferred_signals():  # a second Ctrl-C does not leave the destination behind
                _back_out(source, dest, dest_dir, outcome, progress)
        t_verify = time.monotonic()
        outcome.source_checks = verify_after(source, dirtier, digest, klines, "source")
        outcome.verify_seconds += time.monotonic() - t_verify
        with contextlib.suppress(KvmlabError):
            guestside.stop_dirtier(source, dirtier)
        if source.is_alive():
            source.detach()  # it runs on, as before; only its QMP session closes
        outcome.wall_seconds = time.monotonic() - t_start
        return outcome
    dest.disconnect()
    migrated = _attach_qemu(guest_dir, adopted)
    t_verify = time.monotonic()
    outcome.checks_after.extend(verify_after(migrated, dirtier, digest, klines, "destination"))
    outcome.verify_seconds += time.monotonic() - t_verify
    with contextlib.suppress(KvmlabError):
        state = guestside.status(migrated)
        outcome.guest_clock_gap_ms = state.get("maxgap_us", 0) / 1000
        guestside.stop_dirtier(migrated, dirtier)
    outcome.wall_seconds = time.monotonic() - t_start
    return outcome


class _Unfinished(Exception):
    """The migration ended without completing (failed or cancelled)."""


def _follow(
    source: QemuMachine,
    dest: QemuMachine,
    the_plan: Plan,
    outcome: Outcome,
    t0: float,
    progress: Progress,
) -> None:
    """Sample ``query-migrate`` until the migration ends; start postcopy or cancel as planned."""
    settings = the_plan.settings
    postcopy = the_plan.source_caps.get("postcopy-ram", False)
    qmp = source.qmp()
    last_pass = 0.0
    while True:
        t = time.monotonic() - t0
        reply = qmp.execute("query-migrate")
        sample = parse(reply, t)
        outcome.raw_last = reply
        outcome.samples.append(sample)
        outcome.status = sample.status
        if sample.status in FINISHED:
            if sample.error:
                outcome.error = sample.error
            if sample.status == "completed":
                _final_times(qmp, outcome, t0)
            return
        sync = sample.ram.get("dirty-sync-count", 0.0)
        if sync != last_pass:
            last_pass = sync
            progress(
                f"pass {sync:.0f} at {t:.1f} s: {sample.ram.get('remaining', 0) / 1048576:.0f}"
                f" MiB remaining, {sample.ram.get('mbps', 0):.0f} Mbit/s"
            )
        if (
            postcopy
            and outcome.postcopy_started is None
            and settings.mode == "postcopy"
            and sync > settings.postcopy_after_pass
        ):
            qmp.execute("migrate-start-postcopy")
            outcome.postcopy_started = t
            progress(f"switching to postcopy at {t:.1f} s (after pass {sync - 1:.0f})")
        if settings.mode == "auto" and outcome.postcopy_started is None and sync > AUTO_PASSES:
            qmp.execute("migrate-start-postcopy")
            outcome.postcopy_started = t
            target = the_plan.source_params["downtime-limit"]
            outcome.choice = (
                f"precopy did not reach the {target} ms target in {AUTO_PASSES} "
                "passes (expected downtime "
                f"{sample.times.get('expected-downtime', 0):.0f} ms): postcopy"
            )
            progress(f"auto: {outcome.choice} at {t:.1f} s")
        if t > settings.max_seconds and outcome.cancelled is None:
            if settings.on_timeout == "postcopy" and postcopy and outcome.postcopy_started is None:
                qmp.execute("migrate-start-postcopy")
                outcome.postcopy_started = t
                progress(f"not converged in {settings.max_seconds:g} s: switching to postcopy")
            elif outcome.postcopy_started is None:
                outcome.cancelled = f"not converged in {settings.max_seconds:g} s"
                progress(f"{outcome.cancelled}: cancelling (the source keeps running)")
                qmp.execute("migrate_cancel")
        if not dest.is_alive() and outcome.postcopy_started is None:
            outcome.error = "the destination QEMU exited during the migration"
        if outcome.postcopy_started is not None and (
            not dest.is_alive() or sample.status == "postcopy-paused"
        ):
            # In postcopy the guest's state is split between the two: nothing can resume it.
            outcome.status = "failed"
            outcome.lost = True
            why = (
                "its QEMU exited" if not dest.is_alive() else f"postcopy stalled ({sample.status})"
            )
            outcome.error = (
                f"the destination failed during postcopy ({why}): the guest is "
                "lost (its memory was split between source and destination)"
            )
            return
        event = qmp.wait_event(["MIGRATION_PASS", "MIGRATION"], SAMPLE_S)
        if event is not None:
            outcome.events.append(
                {"t": time.monotonic() - t0, "event": event["event"], "data": event.get("data", {})}
            )


def _final_times(qmp: QmpSession, outcome: Outcome, t0: float) -> None:
    """QEMU 7.2 reports ``completed`` before it has computed ``total-time`` and ``downtime``
    (both 0 until ``migration_calculate_complete`` runs a moment later): sample again until
    they are there, so a finished migration never reads as 0 ms."""
    deadline = time.monotonic() + 3.0
    while not outcome.samples[-1].times.get("total-time") and time.monotonic() < deadline:
        time.sleep(0.02)
        reply = qmp.execute("query-migrate")
        outcome.samples.append(parse(reply, time.monotonic() - t0))
        outcome.raw_last = reply


def _wait_running(dest: QemuMachine, outcome: Outcome) -> float:
    """Wait until the destination's guest runs; the instant it was seen running."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        if not dest.is_alive():
            raise RuntimeFailure("the destination QEMU exited right after the switch-over")
        status = dest.qmp().execute("query-status")
        if status.get("running"):
            dest.resumed()
            return time.monotonic()
        time.sleep(0.02)
    raise RuntimeFailure("the destination's guest did not start running within 60 s")


def _hand_over(
    source: QemuMachine, dest: QemuMachine, guest_dir: Path, record: GuestRecord
) -> GuestRecord:
    """Stop the source and give the guest's address to the destination: both or neither,
    whatever signal arrives (held until it is done)."""
    with deferred_signals():
        source.shutdown(force=True)
        try:
            return handover.adopt(guest_dir, dest.run_dir, record, dest.pid or 0, dest.pid_start)
        except OSError as exc:
            raise RuntimeFailure(
                f"handing {guest_dir} over to the destination failed: {exc}"
            ) from exc


def hmp(machine: QemuMachine, command: str) -> str:
    """An HMP command through QMP (for what QMP has no command of its own for)."""
    reply = machine.qmp().execute("human-monitor-command", {"command-line": command})
    return str(reply)


def _back_out(
    source: QemuMachine, dest: QemuMachine, dest_dir: Path, outcome: Outcome, progress: Progress
) -> None:
    """Leave the source running and remove every trace of the destination."""
    with contextlib.suppress(QmpFailure, StateError):
        status = source.qmp().execute("query-migrate").get("status")
        if status not in (*FINISHED, "none", None):
            progress(f"cancelling the migration ({status})")
            source.qmp().execute("migrate_cancel")
            for _ in range(100):
                if source.qmp().execute("query-migrate").get("status") in FINISHED:
                    break
                time.sleep(0.1)
            outcome.status = source.qmp().execute("query-migrate").get("status", "cancelled")
        run = source.qmp().execute("query-status")
        if (
            outcome.postcopy_started is None
            and not run.get("running")
            and run.get("status") in ("paused", "postmigrate")
        ):
            progress(f"resuming the source ({run.get('status')})")
            source.qmp().execute("cont")
            outcome.source_resumed = True
    dest.shutdown(force=True)
    if dest_dir.exists():
        remove_owned(dest_dir)


def _keep_log(dest_dir: Path, guest_dir: Path) -> None:
    """Keep a failed destination's serial log beside the guest's (the evidence)."""
    from kvmlab.render.devices.control import SERIAL_LOG

    with contextlib.suppress(OSError):
        (dest_dir / SERIAL_LOG).replace(guest_dir / "serial.log.failed-destination")
