"""A guest a libvirtd runs: the guest contract (:class:`kvmlab.runtime.machine.Machine`:
launch, exec through the agent, shutdown graceful then forced, context manager), with
libvirt defining, starting and stopping the domain and its QEMU.

The guest is on record (its run directory, ``backend = "libvirt"``, the URI and the domain's
UUID) before libvirt is asked for anything, so ``ps`` and ``down`` find a domain whose
``up`` was killed at any instant; ``down`` destroys and undefines it by UUID.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn, Self

import libvirt

from kvmlab.errors import StateError
from kvmlab.guest.agent import GuestAgent
from kvmlab.guest.agent_libvirt import LibvirtAgent
from kvmlab.guest.errors import AgentError
from kvmlab.proc.processes import alive, find_marked, start_time, tail
from kvmlab.proc.signals import deferred_signals
from kvmlab.progress import Progress
from kvmlab.render.devices.control import RELAY_PORT
from kvmlab.runtime import boottime
from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe, is_local, open_uri
from kvmlab.runtime.libvirt.lookup import domain_active, guest_mark
from kvmlab.runtime.libvirt.monitor import LibvirtMonitor
from kvmlab.runtime.libvirt.publish import release, unpublish_unused
from kvmlab.runtime.machine import (
    Capabilities,
    LaunchFailure,
    Machine,
    MachineConfig,
    MachineState,
)
from kvmlab.runtime.records import GuestRecord

UNDEFINE_ALL = (
    libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
    | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
    | libvirt.VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA
    | libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
)


@dataclass(frozen=True)
class LibvirtFields:
    """The libvirt backend's part of a guest's record (``GuestRecord.backend_fields``)."""

    uri: str = ""
    domain: str = ""
    """The domain's UUID."""
    token: str = ""
    """The token in the domain's metadata (what makes it kvmlab's)."""
    persistent: bool = False
    serial_log: str = ""
    """The serial log's path on the libvirt host."""

    @classmethod
    def of(cls, record: GuestRecord) -> LibvirtFields:
        """The fields as recorded; a missing or mistyped one reads as its default."""
        got = record.backend_fields
        text = {k: got.get(k) for k in ("uri", "domain", "token", "serial_log")}
        return cls(
            **{k: v if isinstance(v, str) else "" for k, v in text.items()},
            persistent=got.get("persistent") is True,
        )


def start_fix(message: str, guest: str, uri: str) -> list[str]:
    """What a user does about libvirt's refusal to define or start a domain."""
    if "Permission denied" in message:
        return [
            "libvirt runs QEMU as its own user (see 'virsh capabilities', secmodel dac): "
            "put the file where that user can read it"
        ]
    if "already exists" in message or "already defined" in message:
        return [
            f"a domain of that name exists: virsh -c '{uri}' undefine {guest} (if it is a leftover)"
        ]
    if "tap" in message.lower():
        return [
            "a tap the lab names must exist on the daemon's host (ip tuntap add dev NAME "
            "mode tap, multi_queue for queues > 1); kvmlab's own taps (NICs on the lab's "
            "networks) need a daemon of this host"
        ]
    if "passt" in message or "Invalid value" in message:
        return [
            "kvmlab renders for the libvirt it asked; report this with 'kvmlab render "
            "-o libvirt --connect URI'"
        ]
    return []


class LibvirtMachine(Machine):
    """One libvirt domain, rendered by kvmlab, at ``uri``."""

    capabilities = Capabilities(
        exit_counters=False,
        refused=(
            "runs under libvirt, which owns its QMP monitor (use 'virsh "
            "qemu-monitor-command' or the qemu backend)"
        ),
    )
    boot_poll_s = 1.0
    agent_route = " through libvirt"

    def __init__(
        self,
        config: MachineConfig,
        uri: str,
        xml: str = "",
        uuid: str = "",
        persistent: bool = False,
        serial_log: str = "",
        token: str = "",
        qemu_uid: int | None = None,
        holds_publish: bool = False,
    ) -> None:
        super().__init__(config)
        self._holds_publish = holds_publish
        """Whether this machine holds the publish lock (its uploads are not in use until
        its domain exists): released once it does, or when the machine is given up."""
        self.uri = uri
        self.xml = xml
        self.uuid = uuid
        self.persistent = persistent
        self.serial_log = serial_log
        """The serial log's path on the libvirt host."""
        self._conn: Any = None
        self._dom: Any = None
        self.token = token
        """The token in the domain's metadata: only a domain that carries it is ever looked
        at, stopped or undefined (a user's domain of the same name or UUID never is)."""
        self.qemu_uid = qemu_uid
        self._created = bool(uuid and token) and not xml
        self._marker = uuid or str(config.run_dir)
        """What the domain's QEMU command line contains (its UUID)."""

    @property
    def connection(self) -> Any:
        """The open libvirt connection to the guest's daemon, if any (a ``virConnect``)."""
        return self._conn

    @property
    def domain_name(self) -> str:
        """The libvirt domain's name: ``lab-guest``."""
        return "-".join((self.config.lab, *self.config.address))

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """The domain defined and started (on record before libvirt hears of it; the
        contract destroys it again if this fails half-way)."""
        self._conn = open_uri(self.uri, self.config.name)
        self._start_domain()

    def come_up(self, on_up: Callable[[], None] | None) -> float:
        """libvirt holds QMP: QEMU is up once the domain started (before ``on_up``)."""
        t_started = time.monotonic()
        if on_up is not None:
            on_up()
        return t_started

    def _let_go(self) -> None:
        """Release the publish lock if this machine holds it."""
        if self._holds_publish:
            self._holds_publish = False
            release()

    def _start_domain(self) -> None:
        try:
            self._make_domain()
        finally:
            self._let_go()  # the domain names its uploads now (or was never made)

    def _make_domain(self) -> None:
        conn, name = self._conn, self.config.name
        step = "define" if self.persistent else "start"
        for lookup, key in (
            (conn.lookupByName, self.domain_name),
            (conn.lookupByUUIDString, self.uuid),
        ):
            with contextlib.suppress(libvirt.libvirtError):
                self._taken(lookup(key))
        try:
            with deferred_signals():  # created and recorded, or neither
                self._created = True  # on record with its token: down finds it by that
                if self.persistent:
                    self._dom = conn.defineXML(self.xml)
                    step = "start"
                    self._dom.create()
                else:
                    self._dom = conn.createXML(self.xml, 0)
                self.find_pid()
                self.record().save(self.run_dir)
        except libvirt.libvirtError as exc:
            message = describe(exc)
            raise LibvirtFailure(
                f"libvirt could not {step} domain {self.domain_name}: {message}",
                self.uri,
                name,
                start_fix(message, self.domain_name, self.uri),
            ) from None

    def _taken(self, dom: Any) -> NoReturn:
        """Refuse a name or UUID already in use, saying whose it is: another kvmlab guest
        (lab ``a-b`` guest ``c`` and lab ``a`` guest ``b-c`` join to the same name) is
        never called a leftover."""
        other = owner_of(dom)
        here = f"a domain named {self.domain_name} (or with its UUID {self.uuid}) exists already"
        if other is not None and other != self.config.name:
            raise LibvirtFailure(
                f"{here}: it is kvmlab's guest {other} of another lab, whose "
                "name joins to the same domain name",
                self.uri,
                self.config.name,
                [f"rename this lab or guest (or stop {other} first)"],
            )
        raise LibvirtFailure(
            f"{here}; kvmlab leaves it alone",
            self.uri,
            self.config.name,
            [
                f"if it is a leftover: virsh -c '{self.uri}' destroy {self.domain_name}; "
                f"virsh -c '{self.uri}' undefine {self.domain_name}"
            ],
        )

    def find_pid(self, exclude: int | None = None) -> None:
        """QEMU's pid when the daemon is on this host (found by the domain's UUID;
        ``exclude``: a migration's source QEMU, which has the same UUID)."""
        if not is_local(self.uri):
            return
        for pid in find_marked(self.uuid):
            if pid != exclude and self.is_our_qemu(pid):
                self.pid = pid
                self._pid_start = start_time(pid)
                self._marker = self.uuid
                return

    def is_our_qemu(self, pid: int) -> bool:
        """Whether ``pid`` is this domain's QEMU: ``-uuid UUID`` among its arguments and run
        as libvirt's QEMU user (a process anyone could start naming the UUID is not)."""
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            owner = Path(f"/proc/{pid}").stat().st_uid
        except OSError:
            return False
        named = any(a == b"-uuid" and b == self.uuid.encode() for a, b in itertools.pairwise(argv))
        return named and (self.qemu_uid is None or owner == self.qemu_uid)

    def _serial_path(self) -> Path | None:
        """The serial log as this process sees it: through QEMU's own root, which is the
        daemon's mount namespace (a private libvirtd has its own /var/log/libvirt)."""
        if self.pid is None or not self.serial_log:
            return None
        return Path(f"/proc/{self.pid}/root{self.serial_log}")

    def boot_serial(self) -> Path | None:
        return self._serial_path()

    def boot_probes(
        self, serial: Path | None, markers: boottime.MarkerWatch | None
    ) -> dict[str, Callable[[], object]]:
        """The domain's state first, then the contract's (serial log, markers, QEMU's CPU
        time: each when this host sees it)."""
        return {"domain state": lambda: self._state_code(), **super().boot_probes(serial, markers)}

    def launch_failure(self, what: str, returncode: int | None = None) -> LaunchFailure:
        """Named by the guest and its daemon (its logs are the daemon's)."""
        return LaunchFailure(f"guest {self.config.name} on {self.uri}: {what}", [], None)

    def stopped_while(self, when: str) -> LaunchFailure:
        return self.launch_failure(
            f"the domain stopped {when} (see its log in libvirt's log directory)"
        )

    def init_failed(self) -> LaunchFailure:
        return self.launch_failure(
            f"the guest's init failed (see its serial log {self.serial_log})"
        )

    def _state_code(self) -> int:
        try:
            return int(self.domain().state()[0])
        except (libvirt.libvirtError, LibvirtFailure):
            return -1

    def domain(self) -> Any:
        """The domain, looked up by UUID (connecting when needed)."""
        if self._dom is not None:
            return self._dom
        if not self._created:
            raise LibvirtFailure(
                f"domain {self.domain_name} was not created by kvmlab", self.uri, self.config.name
            )
        if self._conn is None:
            self._conn = open_uri(self.uri, self.config.name)
        try:
            dom = self._conn.lookupByUUIDString(self.uuid)
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(
                f"domain {self.domain_name} is gone ({describe(exc)})", self.uri, self.config.name
            ) from None
        if guest_mark(dom).get("token") != self.token:
            raise LibvirtFailure(
                f"domain {self.domain_name} does not carry this run's token: not kvmlab's to touch",
                self.uri,
                self.config.name,
            )
        self._dom = dom
        return self._dom

    @classmethod
    def from_record(cls, run_dir: Path, record: GuestRecord) -> Self:
        """A machine for a libvirt guest another kvmlab command started."""
        fields = LibvirtFields.of(record)
        machine = cls(
            MachineConfig.from_record(run_dir, record),
            fields.uri,
            uuid=fields.domain,
            persistent=fields.persistent,
            serial_log=fields.serial_log,
            token=fields.token,
        )
        machine.pid = record.pid or None
        machine._pid_start = record.pid_start
        machine.boot = dict(record.boot)
        machine._marker = fields.domain or str(run_dir)
        machine._started = record.started
        machine.state = MachineState.RUNNING if machine.is_alive() else MachineState.STOPPED
        return machine

    def is_alive(self) -> bool:
        """Whether the domain runs (libvirt asked; locally its QEMU's pid first)."""
        if self.pid is not None and is_local(self.uri):
            return alive(self.pid, self.uuid, self._pid_start)
        try:
            return bool(self.domain().isActive())
        except (libvirt.libvirtError, LibvirtFailure):
            return False

    def agent(self) -> GuestAgent:
        """The guest's agent through libvirt."""
        return LibvirtAgent(self.domain(), self.config.name)

    def console_socket(self) -> socket.socket:
        """The serial console through libvirt's console stream (see :mod:`.console`)."""
        from kvmlab.runtime.libvirt.console import console_socket

        dom = self.domain()
        return console_socket(self._conn, dom, self.uri, self.config.name)

    def relay_socket(self, child: str) -> Path:
        """The channel's socket where libvirt made it (its channel directory, read from the
        live XML), seen through QEMU's own root (a private daemon's mount namespace)."""
        name = RELAY_PORT.format(child)
        if self.pid is None:
            raise StateError(
                f"{self.config.name}: its QEMU's pid is unknown (a daemon on "
                f"another host?), so the socket of channel {name} is out of reach"
            )
        root = ET.fromstring(self.domain().XMLDesc(0))
        for channel in root.iterfind("devices/channel"):
            target, source = channel.find("target"), channel.find("source")
            if target is not None and target.get("name") == name and source is not None:
                path = source.get("path")
                if path:
                    return Path(f"/proc/{self.pid}/root{path}")
        raise StateError(
            f"{self.config.name}: libvirt made no socket for channel {name} on this host"
        )

    def monitor(self) -> LibvirtMonitor:
        """QMP through libvirt's monitor passthrough (libvirt notes the domain tainted)."""
        return LibvirtMonitor(self.domain(), self.uri, self.config.name)

    def log_tail(self) -> list[str]:
        """The serial log's tail while it can be read through QEMU's root (once QEMU has
        exited, where the logs are on the daemon's host)."""
        serial = self._serial_path()
        lines = [f"serial: {line}" for line in tail(serial, 12)] if serial is not None else []
        return lines or [
            f"serial log: {self.serial_log or '(none)'}, and libvirt's log of the domain "
            f"({self.domain_name}.log), on the daemon's host"
        ]

    def release(self) -> None:
        """A stopped domain: undefined, its uploads deleted."""
        self._undefine()

    def polite_stop(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with contextlib.suppress(AgentError, LibvirtFailure):
            agent = self.agent()
            agent.wait_ready(timeout=min(5.0, timeout))
            agent.exec(["sync"], timeout=min(10.0, timeout))
        if self.config.boots_image:
            return  # the default image has no init to power it off: destroy follows
        with contextlib.suppress(libvirt.libvirtError, LibvirtFailure):
            self.domain().shutdownFlags(libvirt.VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)
            while self.is_alive() and time.monotonic() < deadline:
                time.sleep(0.2)

    def kill(self) -> None:
        """Destroy (if running) and undefine the domain; nothing of it is left in libvirt."""
        if not self._created:
            self._unmade()
            return  # not kvmlab's (or never made): never touched
        try:
            dom = self.domain()
        except LibvirtFailure:  # never created (or gone): what was uploaded for it goes
            self._unpublish()
            return
        with contextlib.suppress(libvirt.libvirtError):
            if dom.isActive():
                dom.destroy()
        self._undefine()

    def _undefine(self) -> None:
        if not self._created:
            self._unmade()
            return
        with contextlib.suppress(libvirt.libvirtError, LibvirtFailure):
            dom = self.domain()
            if dom.isPersistent():
                dom.undefineFlags(UNDEFINE_ALL)
        self._dom = None
        self._unpublish()

    def _unmade(self) -> None:
        """A domain rendered for this run but never made: what was uploaded for it (its
        seed, an image copy no domain uses) is deleted."""
        self._let_go()
        if not self.xml or self._created:
            return
        with contextlib.suppress(LibvirtFailure):
            if self._conn is None:
                self._conn = open_uri(self.uri, self.config.name)
            self._unpublish()

    def _unpublish(self) -> None:
        """Delete the uploads (image copies, seeds) no domain of the daemon uses any more."""
        with contextlib.suppress(libvirt.libvirtError, LibvirtFailure):
            if self._conn is not None:
                unpublish_unused(self._conn)

    def stop_as_recorded(
        self,
        record: GuestRecord,
        force: bool,
        progress: Progress,
        stop_children: Callable[[Machine, str], None],
    ) -> bool:
        """Stop, undefine, unpublish; a domain that no longer runs is forgotten alike (an
        unreachable daemon failed :meth:`check_reachable` first; the run state is kept)."""
        running = self.is_alive()
        if running:
            self._stop_inside(record, force, progress, stop_children)
        progress.step(
            f"stopping {record.name} (libvirt {self.uri})"
            if running
            else f"forgetting {record.name} (its domain no longer runs)"
        )
        self.shutdown(force=force or record.state != "running")
        self.disconnect()
        return running

    def disconnect(self) -> None:
        """Close the libvirt connection (the domain is not touched)."""
        if self._conn is not None:
            with contextlib.suppress(libvirt.libvirtError):
                self._conn.close()
        self._conn = self._dom = None

    def extend_record(self, record: GuestRecord) -> None:
        record.backend = "libvirt"
        record.backend_fields = asdict(
            LibvirtFields(self.uri, self.uuid, self.token, self.persistent, self.serial_log)
        )
        record.marker = self.uuid

    @classmethod
    def running_on_record(cls, record: GuestRecord, run_dir: Path) -> bool:
        """A domain of a daemon elsewhere (no pid here): whether libvirt says it runs."""
        if record.pid:
            return super().running_on_record(record, run_dir)
        fields = LibvirtFields.of(record)
        return domain_active(fields.uri, fields.domain, fields.token)

    @classmethod
    def process_here(cls, record: GuestRecord) -> bool:
        """Only a daemon of this host gave the record a pid."""
        return bool(record.pid)

    daemon_owns_process = True

    @classmethod
    def check_reachable(cls, record: GuestRecord) -> None:
        """Connect to the guest's daemon once (a refusal or timeout is a LibvirtFailure)."""
        fields = LibvirtFields.of(record)
        if fields.uri and fields.domain:
            open_uri(fields.uri, record.name).close()


def owner_of(dom: Any) -> str | None:
    """``lab/address`` of the kvmlab guest a domain is, from its metadata; None if none."""
    mark = guest_mark(dom)
    lab, address = mark.get("lab"), mark.get("address")
    return f"{lab}/{address}" if lab and address else None
