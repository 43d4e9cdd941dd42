"""kvmlab's own migration: a second QEMU of this host, driven over QMP.

The destination QEMU is the source's command line with its own run directory and
``-incoming defer`` (same devices by construction; :mod:`kvmlab.runtime.qemu.handover`).
Until the switch-over the source keeps the guest: a destination that fails to start or
dies leaves it running (QEMU resumes it), a cancel (``migrate_cancel``) too. After it, the
source QEMU is stopped and the guest's record names the destination's.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvmlab.errors import KvmlabError, QmpFailure, RuntimeFailure, StateError, UsageError, printable
from kvmlab.migrate.modes import Plan, plan
from kvmlab.migrate.pages import Saver
from kvmlab.migrate.probe import Where
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import FINISHED
from kvmlab.migrate.transports.base import JobState, PageSides, Route, Transport
from kvmlab.migrate.workload import serial_tail
from kvmlab.proc.confined import remove_owned
from kvmlab.proc.processes import find_marked
from kvmlab.proc.signals import deferred_signals
from kvmlab.progress import Progress
from kvmlab.render.runfiles import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    PROBE_LOG,
    QMP_SOCKET,
    SERIAL_LOG,
    UNIX_PATH_MAX,
)
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.qemu import handover, lab_taps, ovs_ports
from kvmlab.runtime.qemu.machine import QemuMachine, qemu_command
from kvmlab.runtime.rundir import GuestRecord

CANCEL_WAIT_S = 10.0
"""How long a cancelled migration may take to end before the destination is stopped."""


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


class QmpTransport(Transport[QemuMachine]):
    """The guest moved to a second QEMU of this host, over QMP on both."""

    sample_s = 0.1

    def setup(self) -> None:
        self.dest_dir = handover.migration_dir(self.guest_dir, self.record)
        self.plan: Plan | None = None
        self.dest: QemuMachine | None = None
        self._taps: list[lab_taps.TapMove] = []
        self._ports: list[ovs_ports.PortMove] = []
        self._ports_moved = False
        self._argv: list[str] = []
        self._last: dict[str, Any] = {}
        self._source_stopped = False

    @classmethod
    def check_route(cls, route: Route, record: GuestRecord) -> None:
        if route.to_uri is not None:
            raise UsageError(
                f"--to moves a guest of the libvirt backend; {record.name} runs on "
                "kvmlab's own QEMU (without --to it is migrated on this host)"
            )

    # --- before ------------------------------------------------------------------------------

    def prepare(self, progress: Progress) -> None:
        address = self.record.name
        run_state = self.source.qmp().execute("query-status")
        if not run_state.get("running"):
            raise StateError(
                f"{address} is not running but {run_state.get('status')} (a failed "
                f"postcopy leaves its source so); 'kvmlab down {self.record.lab}' removes it"
            )
        check_destination_sockets(address, self.dest_dir)
        if self.dest_dir.exists():
            if find_marked(f"{self.dest_dir}/"):
                raise StateError(
                    f"a QEMU of an earlier migration of {address} still runs from "
                    f"{self.dest_dir}; 'kvmlab down {self.record.lab}' stops it"
                )
            remove_owned(self.dest_dir)  # a failed attempt's leftovers
        self._argv, self.forwards = handover.destination_argv(
            self.record.argv, self.guest_dir, self.dest_dir, self.route.dest_qemu
        )
        self._argv, self._taps = lab_taps.plan(self.record.lab, address, self._argv)
        self._argv, self._ports = ovs_ports.plan(self.record.lab, address, self._argv)
        own = {m.dest for m in self._ports}
        shared = [
            p
            for p in handover.shared_server_sockets(self._argv, self.dest_dir)
            if p not in own and not p.startswith(f"{self.guest_dir}/")
        ]
        if shared:
            raise StateError(
                f"cannot migrate {address}: its QEMU is the vhost-user socket server at "
                f"{printable(shared[0])}, which is not a port of the lab's OVS switch; a "
                "destination QEMU on this host would take that socket's name and wait for "
                "a peer that stays with the source"
            )
        offered = {c["capability"] for c in self.source.qmp().execute("query-migrate-capabilities")}
        self.plan = plan(self.settings, offered)
        if self.settings.compare_pages:  # held paused once the RAM is in, until compared
            self._argv = [*self._argv, "-S"]
        self.dest = QemuMachine(replace(self.source.config, argv=self._argv, run_dir=self.dest_dir))

    def describe(self) -> str:
        return self._plan().describe()

    def _plan(self) -> Plan:
        assert self.plan is not None, "prepare() first"
        return self.plan

    def _dest(self) -> QemuMachine:
        assert self.dest is not None, "prepare() first"
        return self.dest

    @property
    def source_name(self) -> str:
        return qemu_command(self.record.argv)[0]

    @property
    def dest_name(self) -> str:
        return qemu_command(self._argv)[0]

    @property
    def can_postcopy(self) -> bool:
        return self._plan().source_caps.get("postcopy-ram", False)

    def downtime_target_ms(self) -> object:
        return self._plan().source_params.get("downtime-limit")

    # --- the job -----------------------------------------------------------------------------

    def heartbeat_files(self) -> list[Where]:
        return [self.guest_dir / PROBE_LOG, self.dest_dir / PROBE_LOG]

    def open(self, progress: Progress) -> None:
        dest, the_plan = self._dest(), self._plan()
        if self._ports:
            progress.step(
                "the destination's own OVS ports (no flows until the switch-over): "
                + ", ".join(f"{m.port}{ovs_ports.NEXT} on {m.dest}" for m in self._ports)
            )
            ovs_ports.add_next(self.record.lab, self._ports)
        progress.step(f"starting the destination QEMU ({self.dest_dir.name}, -incoming defer)")
        try:
            dest.launch_incoming()
        except KvmlabError as exc:
            lines = exc.lines()
            raise RuntimeFailure(
                f"the destination QEMU did not start: {lines[0]}"
                + "".join(f"; {x.strip()}" for x in lines[1:4])
            ) from exc
        if self._taps:
            progress.step(
                "the destination's taps onto the lab's bridges: "
                + ", ".join(f"{t.dest} on {t.bridge} (the source's {t.source})" for t in self._taps)
            )
            lab_taps.attach(self.record.lab, self._taps)
        _set(self.source, the_plan.source_caps, the_plan.source_params)
        _set(dest, the_plan.dest_caps, the_plan.dest_params)
        self._uri = (
            f"tcp:127.0.0.1:{_free_port()}"
            if self.route.channel == "tcp"
            else f"unix:{self.dest_dir / 'migrate.sock'}"
        )
        dest.qmp().execute("migrate-incoming", {"uri": self._uri})

    def start(self, progress: Progress) -> None:
        progress.step(f"sending the guest over {self._uri}")
        self.source.qmp().execute("migrate", {"uri": self._uri})

    def sample(self) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
        reply = self.source.qmp().execute("query-migrate")
        self._last = reply
        return reply, None

    def ended(self) -> JobState | None:
        status = self._last.get("status")
        if status not in FINISHED:
            return None
        return JobState(str(status), self._last.get("error-desc"))

    def wait(self, seconds: float) -> list[dict[str, Any]]:
        event = self.source.qmp().wait_event(["MIGRATION_PASS", "MIGRATION"], seconds)
        return [event] if event is not None else []

    def start_postcopy(self) -> None:
        self.source.qmp().execute("migrate-start-postcopy")

    def cancel(self) -> None:
        self.source.qmp().execute("migrate_cancel")

    def destination_alive(self) -> bool | None:
        return self._dest().is_alive()

    # --- after -------------------------------------------------------------------------------

    def page_sides(self) -> PageSides:
        source, dest = self.source, self._dest()
        mtree = source.qmp().execute("human-monitor-command", {"command-line": "info mtree -f"})
        return PageSides(
            _saver(source),
            _saver(dest),
            str(mtree),
            self.dest_dir,
            dest.pid or 0,
            source.pid or 0,
        )

    def resume_destination(self) -> None:
        self._dest().qmp().execute("cont")

    def destination_running(self) -> float:
        dest = self._dest()
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            if not dest.is_alive():
                raise RuntimeFailure("the destination QEMU exited right after the switch-over")
            status = dest.qmp().execute("query-status")
            if status.get("running"):
                dest.resumed()
                resumed = time.monotonic()
                if self._ports and not self._ports_moved:
                    # the lab's OVS ports to the destination's sockets (flows stay)
                    ovs_ports.hand_over(self.record.lab, self._ports)
                    self._ports_moved = True
                return resumed
            time.sleep(0.02)
        raise RuntimeFailure("the destination's guest did not start running within 60 s")

    def level_factor(self) -> float:
        return self._dest().level_factor()

    def hand_over(self) -> Machine:
        """Stop the source and give the guest's address to the destination: both or
        neither, whatever signal arrives (held until it is done)."""
        dest = self._dest()
        with deferred_signals():
            if not self._source_stopped:  # (a second call must not stop a stopped machine:
                self.source.shutdown(force=True)  # that removes its run directory)
                self._source_stopped = True
            try:
                adopted = handover.adopt(
                    self.guest_dir, self.dest_dir, self.record, dest.pid or 0, dest.pid_start
                )
            except OSError as exc:
                raise RuntimeFailure(
                    f"handing {self.guest_dir} over to the destination failed: {exc}"
                ) from exc
        dest.disconnect()
        return backends.attach(self.guest_dir, adopted)

    def back_out(self, outcome: Outcome, progress: Progress) -> Machine:
        """Leave the source running and remove every trace of the destination."""
        source, dest = self.source, self._dest()
        if dest.is_alive() or self.dest_dir.exists():
            with contextlib.suppress(QmpFailure, StateError):
                status = source.qmp().execute("query-migrate").get("status")
                if status not in (*FINISHED, "none", None):
                    progress.step(f"cancelling the migration ({status})")
                    source.qmp().execute("migrate_cancel")
                    deadline = time.monotonic() + CANCEL_WAIT_S
                    while time.monotonic() < deadline:
                        if source.qmp().execute("query-migrate").get("status") in FINISHED:
                            break
                        time.sleep(0.1)
                    outcome.status = (
                        source.qmp().execute("query-migrate").get("status", "cancelled")
                    )
                run = source.qmp().execute("query-status")
                if (
                    outcome.postcopy_started is None
                    and not run.get("running")
                    and run.get("status") in ("paused", "postmigrate")
                ):
                    progress.step(f"resuming the source ({run.get('status')})")
                    source.qmp().execute("cont")
                    outcome.source_resumed = True
            dest.shutdown(force=True)
            if self.dest_dir.exists():
                remove_owned(self.dest_dir)
        if not self._ports_moved:
            ovs_ports.remove_next(self.record.lab, self._ports)
        return source

    def destination_evidence(self) -> str:
        evidence = serial_tail(self.dest_dir)
        self._keep_log()
        return evidence

    def _keep_log(self) -> None:
        """Keep a failed destination's serial log beside the guest's (the evidence)."""
        with contextlib.suppress(OSError):
            (self.dest_dir / SERIAL_LOG).replace(self.guest_dir / "serial.log.failed-destination")

    def abandon(self) -> None:
        self._dest().shutdown(force=True)
        remove_owned(self.dest_dir)
        self.source.detach()  # paused, holding half a guest: 'kvmlab down' removes it

    def discard(self) -> None:
        dest = self.dest
        if (
            dest is not None
            and dest.is_alive()
            and GuestRecord.read(self.guest_dir).pid != dest.pid
        ):
            dest.shutdown(force=True)  # never handed over: it is not the guest
            remove_owned(self.dest_dir)
        if not self._ports_moved:
            with contextlib.suppress(KvmlabError):
                ovs_ports.remove_next(self.record.lab, self._ports)

    def close(self) -> None:
        if self.dest is not None:
            self.dest.disconnect()


def _saver(machine: QemuMachine) -> Saver:
    """``pmemsave`` on ``machine``: guest-physical RAM written to a path (a FIFO); allowed
    a second per 16 MiB, at least a minute (a TCG host reads RAM slowly)."""

    def save(start: int, size: int, path: str) -> None:
        args = {"val": start, "size": size, "filename": path}
        machine.qmp().execute("pmemsave", args, timeout=max(60.0, size / (16 << 20)))

    return save


def _set(machine: QemuMachine, caps: dict[str, bool], params: dict[str, object]) -> None:
    if caps:
        machine.qmp().execute(
            "migrate-set-capabilities",
            {"capabilities": [{"capability": k, "state": v} for k, v in caps.items()]},
        )
    if params:
        machine.qmp().execute("migrate-set-parameters", params)
