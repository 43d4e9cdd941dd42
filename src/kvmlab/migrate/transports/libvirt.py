"""A libvirt guest moved to another libvirtd (``kvmlab migrate ADDRESS --to URI``).

libvirt's own migration (``virDomainMigrate3``, managed by this client: libvirt talks to
both daemons, the QEMUs stream to each other), measured twice: libvirt's job statistics
(what ``virsh domjobinfo`` prints, polled during the job and the completed job's at the
end) beside QEMU's ``query-migrate`` on the source, read through the domain's monitor
(:class:`~kvmlab.runtime.libvirt.monitor.LibvirtMonitor`, libvirt's passthrough, which
libvirt notes as a ``custom-monitor`` taint in the domain's log). The
destination gets the guest image through its own storage API first; the guest's record
follows it (URI, pid).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import libvirt

from kvmlab.errors import KvmlabError, StateError, UsageError
from kvmlab.guest.kernel import default_cache_dir
from kvmlab.migrate.jobinfo import job_stats
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.netprobe import GUEST_PORT
from kvmlab.migrate.probe import Where
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.transports.base import JobState, Refused, Route, Transport
from kvmlab.migrate.transports.libvirt_disks import (
    CopiedDisk,
    copied_disks,
    make_copies,
    remove_copies,
    retarget,
)
from kvmlab.proc.processes import find_marked
from kvmlab.proc.sockets import close_connection, tcp_connections
from kvmlab.progress import QUIET, Progress
from kvmlab.render.devices.control import PROBE_PORT
from kvmlab.render.xmldom import QEMU_NS  # (importing it registers the XML prefixes)
from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe, is_local, open_uri
from kvmlab.runtime.libvirt.machine import LibvirtMachine
from kvmlab.runtime.libvirt.monitor import LibvirtMonitor
from kvmlab.runtime.libvirt.publish import VOLUME, hold, publish, release, unpublish_unused
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord

JOIN_S = 60.0
"""How long an aborted job's thread may take to return."""

FLAGS = {
    "precopy": 0,
    "postcopy": libvirt.VIR_MIGRATE_POSTCOPY,
    "multifd": libvirt.VIR_MIGRATE_PARALLEL,
    "auto-converge": libvirt.VIR_MIGRATE_AUTO_CONVERGE,
    "xbzrle": libvirt.VIR_MIGRATE_COMPRESSED,
}
"""kvmlab's modes as libvirt's migration flags (each on top of ``VIR_MIGRATE_LIVE``)."""


def flags_for(settings: Settings, persistent: bool) -> int:
    """libvirt's flags for a mode (refused by name when libvirt has none kvmlab uses)."""
    if settings.mode not in FLAGS:
        raise UsageError(
            f"--mode {settings.mode}: through libvirt kvmlab offers {', '.join(FLAGS)}"
        )
    flags = libvirt.VIR_MIGRATE_LIVE | FLAGS[settings.mode]
    if settings.on_timeout == "postcopy":  # switched to postcopy at --max-time, as on qemu
        flags |= libvirt.VIR_MIGRATE_POSTCOPY
    if persistent:
        flags |= libvirt.VIR_MIGRATE_PERSIST_DEST | libvirt.VIR_MIGRATE_UNDEFINE_SOURCE
    return int(flags)


def params_for(
    settings: Settings, dest_uri: str, xml: str, source_uri: str = "qemu:///system"
) -> dict[str, Any]:
    """``virDomainMigrate3``'s typed parameters: the destination XML (its image paths),
    bandwidth, multifd channels; a loopback destination streams over loopback."""
    params: dict[str, Any] = {libvirt.VIR_MIGRATE_PARAM_DEST_XML: xml}
    if settings.bandwidth_mibs is not None:
        params[libvirt.VIR_MIGRATE_PARAM_BANDWIDTH] = int(settings.bandwidth_mibs)
    if settings.mode == "multifd" and settings.multifd_channels is not None:
        params[libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS] = settings.multifd_channels
    if settings.mode == "xbzrle":
        params[libvirt.VIR_MIGRATE_PARAM_COMPRESSION] = "xbzrle"
    host = stream_address(source_uri, dest_uri)
    if host is not None:
        params[libvirt.VIR_MIGRATE_PARAM_URI] = tcp_uri(host)
    return params


def tcp_uri(host: str) -> str:
    """``tcp://HOST`` as libvirt's migration parameters take it (an IPv6 one bracketed)."""
    return f"tcp://[{host}]" if ":" in host else f"tcp://{host}"


def disk_params(source_uri: str, dest_uri: str, disks: list[CopiedDisk]) -> dict[str, Any]:
    """The disks to copy, and where the destination's NBD server listens for them: the
    address the migration stream takes (loopback on one host), not every address."""
    params: dict[str, Any] = {libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS: [d.dev for d in disks]}
    host = stream_address(source_uri, dest_uri)
    if host is not None:
        params[libvirt.VIR_MIGRATE_PARAM_DISKS_URI] = tcp_uri(host)
    return params


def stream_address(source_uri: str, dest_uri: str) -> str | None:
    """Where the source's QEMU sends the migration stream, when kvmlab knows better than
    the host name the destination daemon reports (which may resolve elsewhere: another
    interface, or from a namespace to the wrong host): this host's loopback between two
    daemons of this host; the address the user gave for another host; for a guest coming
    back from another host, the address of this host on the route to it. None: libvirt's
    own choice (a host given by name is libvirt's to resolve)."""
    here, there = is_local(source_uri), is_local(dest_uri)
    if here and there:
        return "127.0.0.1"
    if not there:
        dest = ip_literal(dest_uri)
        return str(dest) if dest is not None else None
    source = ip_literal(source_uri)
    if source is None:
        return None
    family = socket.AF_INET6 if source.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((str(source), 9))  # routes only: nothing is sent
        except OSError:
            return None
        return str(probe.getsockname()[0])


def ip_literal(uri: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The host of ``uri`` when it is written as an IP address (nothing is resolved)."""
    host = urlsplit(uri).hostname
    try:
        return ipaddress.ip_address(host or "")
    except ValueError:
        return None


def user_netdev(xml: str) -> str | None:
    """The id of the domain's first user-network netdev: kvmlab's own (a QEMU argument,
    for port forwards), else libvirt's ``<interface type='user'>``, whose netdev libvirt
    names ``host`` + its alias (``hostnet0``; the alias is in the live XML)."""
    root = ET.fromstring(xml)
    for arg in root.iter(f"{{{QEMU_NS}}}arg"):
        value = arg.get("value", "")
        if value.startswith("user,"):
            return next((o[3:] for o in value.split(",") if o.startswith("id=")), None)
    for alias in root.iterfind("devices/interface[@type='user']/alias"):
        if alias.get("name"):
            return f"host{alias.get('name')}"
    return None


def image_files(xml: str, address: str) -> dict[str, Path]:
    """The local files (this kvmlab's image cache) of the kernel and initrd a domain boots,
    by tag; refused when they are not volumes kvmlab published."""
    root = ET.fromstring(xml)
    files: dict[str, Path] = {}
    for tag in ("kernel", "initrd"):
        node = root.find(f"os/{tag}")
        if node is None or not node.text:
            continue
        name = Path(node.text).name
        if not VOLUME.match(name):
            raise UsageError(f"{address}: its {tag} {node.text} is not an image kvmlab published")
        digest, file = name.split("-", 1)
        local = default_cache_dir() / "images" / digest / file
        if not local.is_file():
            raise UsageError(
                f"{address}: its {tag} ({local}) is not in this kvmlab's image "
                "cache (run 'kvmlab image')"
            )
        files[tag] = local
    return files


def dest_xml(
    xml: str, paths: dict[str, Path], same_host: bool
) -> tuple[str, list[tuple[str, str]]]:
    """The domain XML with its kernel and initrd at the destination's paths; for a
    destination on the same host, without the slirp port forwards the source still holds
    (they are added on the destination after the switch-over), which are returned as
    ``(netdev id, rule)``."""
    root = ET.fromstring(xml)
    for tag, path in paths.items():
        node = root.find(f"os/{tag}")
        if node is not None:
            node.text = str(path)
    held: list[tuple[str, str]] = []
    for arg in root.iter(f"{{{QEMU_NS}}}arg"):
        value = arg.get("value", "")
        if not value.startswith("user,") or "hostfwd=" not in value:
            continue
        # a network probe's forward that an earlier migration gave the domain is not the
        # lab's: it is never carried on (the probe adds its own)
        probe = ("hostfwd=udp:", f"-:{GUEST_PORT}")
        opts = [
            o for o in value.split(",") if not (o.startswith(probe[0]) and o.endswith(probe[1]))
        ]
        arg.set("value", ",".join(opts))
        if not same_host:
            continue
        netdev = next((o[3:] for o in opts if o.startswith("id=")), "")
        held += [(netdev, o[len("hostfwd=") :]) for o in opts if o.startswith("hostfwd=")]
        arg.set("value", ",".join(o for o in opts if not o.startswith("hostfwd=")))
    return ET.tostring(root, encoding="unicode"), held


class LibvirtTransport(Transport[LibvirtMachine]):
    """libvirt's migration job from the guest's daemon to the one at ``route.to_uri``."""

    sample_s = 0.2

    def setup(self) -> None:
        self.lv_source = self.source
        self.to_uri = self.route.to_uri or ""  # check_route refused a route without one
        self.dconn: Any = None
        self.flags = 0
        self._xml = ""
        self._beats: list[Where] = []
        self._held = False
        self._done: dict[str, Any] = {}
        self._worker: threading.Thread | None = None
        self._cancelled = False
        self._t_end: float | None = None
        self.same_host = True
        self._netdev: str | None = None
        self._disks: list[CopiedDisk] = []
        self.mconn: Any = None
        self._progress: Progress = QUIET
        self._watched: Any = None
        """The source domain on a connection of its own, for sampling and cancelling the
        job: the job's connection waits on the migration call, and behind it (a link cut
        during the disk copy held a query there for 12 minutes)."""
        self._monitor: LibvirtMonitor | None = None
        """The source's monitor on that connection (QEMU's ``query-migrate``)."""
        self._copies: dict[str, str] = {}
        """The destination's copies of the disks, by target, while they are kvmlab's to
        delete (until the job completes)."""

    @classmethod
    def check_route(cls, route: Route, record: GuestRecord) -> None:
        if route.to_uri is None:
            raise UsageError(
                f"{record.name} runs under libvirt, which migrates it itself: "
                "kvmlab migrate ADDRESS --to URI (the destination daemon)"
            )

    # --- before ------------------------------------------------------------------------------

    def prepare(self, progress: Progress) -> None:
        self._progress = progress
        source, address = self.lv_source, self.record.name
        if self.to_uri == source.uri:
            raise UsageError(f"--to {self.to_uri}: {address} runs there already")
        if not source.is_alive():
            raise StateError(f"{address} is not running")
        live = ET.fromstring(source.domain().XMLDesc(0))
        self._disks = copied_disks(source.domain(), live, address, source.uri)
        if live.find("devices/interface[@type='ethernet']") is not None:
            raise UsageError(
                f"{address} has tap NICs: on the destination they would not be on the lab's "
                "network (its bridge is in a namespace of this host) nor on your tap; "
                "kvmlab migrates libvirt guests with user NICs only so far"
            )
        self.flags = flags_for(self.settings, source.persistent)
        if self._disks:
            self.flags |= libvirt.VIR_MIGRATE_NON_SHARED_DISK
        self.dconn = open_uri(self.to_uri, self.record.name)
        self.mconn = open_uri(source.uri, self.record.name)
        try:
            self._watched = self.mconn.lookupByUUIDString(source.uuid)
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(f"cannot find the domain ({describe(exc)})", source.uri) from None
        self._monitor = LibvirtMonitor(self._watched, source.uri, address)
        xml = source.domain().XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        files = image_files(xml, address)
        hold()  # the copies are unused until the job defines the domain there: see publish.LOCK
        self._held = True
        where: dict[Path, Path] = {}
        if files:
            progress.step(f"publishing the guest image to {self.to_uri}")
            where = publish(self.dconn, self.to_uri, list(files.values()))
        self.same_host = is_local(self.to_uri) and is_local(source.uri)
        self._beats = probe_files(source, self.to_uri, xml)
        self._netdev = user_netdev(ET.tostring(live, encoding="unicode"))
        paths = {t: where[f] for t, f in files.items()}
        self._xml, self.forwards = dest_xml(xml, paths, self.same_host)
        if self._disks:
            sizes = ", ".join(f"{d.dev} {d.size / 1048576:g} MiB" for d in self._disks)
            progress.step(f"making the copies of its disks on {self.to_uri}: {sizes}")
            self._copies = make_copies(self.dconn, self.to_uri, source.token, self._disks)
            self._xml = retarget(self._xml, self._copies)

    def copied_disks(self) -> tuple[tuple[str, int], ...]:
        return tuple((d.dev, d.size) for d in self._disks)

    def probe_route(self) -> tuple[str, str] | str:
        """The guest's user netdev (with or without forwards) and where the probe's forward
        binds on the destination: this host's loopback, or on another host the IPv4
        address the user reached it at (slirp forwards only IPv4; a name is not resolved
        here, where it may mean something else); or why there is no probe."""
        if not is_local(self.lv_source.uri):
            return f"the guest runs on {self.lv_source.uri}, whose forwards this host cannot reach"
        if self._netdev is None:
            return "the guest has no user network, so no probe reaches it from this host"
        if self.same_host:
            return (self._netdev, "127.0.0.1")
        there = ip_literal(self.to_uri)
        if there is None or there.version != 4:
            return (
                f"--to {self.to_uri} names its host by name or IPv6; the probe's forward "
                "there binds the IPv4 address it is reached at (write the URI with it)"
            )
        return (self._netdev, str(there))

    def forward_from_start(self, netdev: str, rule: str) -> bool:
        """The rule goes into kvmlab's slirp netdev of the destination XML (a port of its
        own on this host, or any on another); libvirt's own ``<interface type='user'>``
        takes no forward without passt: then it is False."""
        root = ET.fromstring(self._xml)
        for arg in root.iter(f"{{{QEMU_NS}}}arg"):
            value = arg.get("value", "")
            if value.startswith("user,") and f"id={netdev}" in value.split(","):
                arg.set("value", f"{value},hostfwd={rule}")
                self._xml = ET.tostring(root, encoding="unicode")
                return True
        return False

    def describe(self) -> str:
        return f"libvirt {self.settings.mode} to {self.to_uri}"

    @property
    def source_name(self) -> str:
        return self.lv_source.uri

    @property
    def dest_name(self) -> str:
        return self.to_uri

    @property
    def can_postcopy(self) -> bool:
        return bool(self.flags & libvirt.VIR_MIGRATE_POSTCOPY)

    # --- the job -----------------------------------------------------------------------------

    def heartbeat_files(self) -> list[Where]:
        return self._beats

    def open(self, progress: Progress) -> None:
        if self.settings.downtime_limit_ms is not None:
            self.lv_source.domain().migrateSetMaxDowntime(self.settings.downtime_limit_ms, 0)

    def start(self, progress: Progress) -> None:
        dom, params = (
            self.lv_source.domain(),
            params_for(self.settings, self.to_uri, self._xml, self.lv_source.uri),
        )
        if self._disks:
            params.update(disk_params(self.lv_source.uri, self.to_uri, self._disks))

        def run() -> None:
            try:
                self._done["dom"] = dom.migrate3(self.dconn, params, self.flags)
            except libvirt.libvirtError as exc:
                self._done["error"] = describe(exc)

        self._worker = threading.Thread(target=run, name="virDomainMigrate3", daemon=True)
        self._worker.start()

    def sample(self) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
        dom = self._watched
        job: dict[str, float] | None = None
        reply: dict[str, Any] | None = None
        with contextlib.suppress(libvirt.libvirtError):
            job = job_stats(dom.jobStats(0)) or None
        if self._monitor is not None:
            with contextlib.suppress(KvmlabError):
                reply = self._monitor.execute("query-migrate")
        return reply, job

    def ended(self) -> JobState | None:
        if self._worker is None or self._worker.is_alive():
            return None
        if self._t_end is None:
            self._t_end = time.monotonic()
        self._release()  # the job has defined the domain there (or failed): see publish.LOCK
        if "dom" in self._done:
            self._copies = {}  # the guest's disks now: no longer kvmlab's to delete
            return JobState("completed")
        error = self._done.get("error", "the job ended without a result")
        return JobState("cancelled" if self._cancelled else "failed", error + _hint(error))

    def wait(self, seconds: float) -> list[dict[str, Any]]:
        if self._worker is not None:
            self._worker.join(seconds)
        else:
            time.sleep(seconds)
        return []

    def start_postcopy(self) -> None:
        try:
            self._watched.migrateStartPostCopy(0)
        except libvirt.libvirtError as exc:
            raise Refused(f"libvirt refused the switch to postcopy: {describe(exc)}") from None

    def cancel(self) -> None:
        self._cancelled = True
        if self._watched is None:
            return  # prepared nothing: there is no job to cancel
        with contextlib.suppress(libvirt.libvirtError):
            self._watched.abortJob()

    def destination_alive(self) -> bool | None:
        return None  # libvirt fails the job when the destination dies

    def unstick(self) -> str | None:
        """Close the source QEMU's connections to the destination's host: a disk mirror
        whose peer vanished while the link was down waits on one forever, and libvirt's
        cancel waits for the mirror (measured: 12 minutes, then only ``ss -K`` ended it)."""
        there = ip_literal(self.to_uri)
        pid = self.lv_source.pid
        if there is None or pid is None or not is_local(self.lv_source.uri):
            return None
        stuck = [c for c in tcp_connections(pid) if c.remote == str(there)]
        closed = [c for c in stuck if close_connection(c)]
        if not closed:
            return None
        ports = ", ".join(f"{c.remote}:{c.remote_port}" for c in closed)
        return f"closed the source QEMU's connection(s) to {ports} (ss -K)"

    # --- after -------------------------------------------------------------------------------

    def destination_running(self) -> float:
        return self._t_end if self._t_end is not None else time.monotonic()

    def hand_over(self) -> Machine:
        """The guest's record moved to the destination daemon (URI, QEMU's pid there: on one
        host the source's QEMU, same UUID, may not have exited yet and is not it)."""
        record = self.lv_source.record()
        old = record.pid
        record.backend_fields["uri"], record.pid, record.pid_start = self.to_uri, 0, None
        moved = LibvirtMachine.from_record(self.guest_dir, record)
        moved.find_pid(exclude=old)
        record = moved.record()
        record.save(self.guest_dir)
        if not moved.is_alive():
            raise LibvirtFailure(
                "the domain does not run on the destination after libvirt completed the "
                f"migration (libvirt says: {_state_words(moved)})",
                self.to_uri,
                record.name,
            )
        return moved

    def after_hand_over(self, moved: Machine, outcome: Outcome) -> None:
        new = self._done.get("dom")
        if new is not None:
            with contextlib.suppress(libvirt.libvirtError):
                completed = new.jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED)
                outcome.backend_job.completed = job_stats(completed)
        with contextlib.suppress(libvirt.libvirtError, LibvirtFailure):
            if self.lv_source.connection is not None:
                unpublish_unused(self.lv_source.connection)  # the source's copies, unused now

    def back_out(self, outcome: Outcome, progress: Progress) -> Machine:
        """libvirt resumes the source of a job that failed; kvmlab waits for the job."""
        self._join()
        return LibvirtMachine.from_record(self.guest_dir, self.lv_source.record())

    def abandon(self) -> None:
        self._join()  # libvirt ends the job it cannot finish; then nothing of it runs here
        self._release()

    def destination_evidence(self) -> str:
        return (
            f"the destination's logs are on the daemon at {self.to_uri}: the serial log "
            f"{self.lv_source.serial_log or '(none)'} and libvirt's log of the domain "
            f"({self.lv_source.domain_name}.log)"
        )

    def discard(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            self.cancel()
            self._join()
        if "dom" in self._done:  # it completed all the same: the record follows the guest
            with contextlib.suppress(KvmlabError, libvirt.libvirtError):
                self.hand_over()

    def _clean_destination(self) -> None:
        """After a job that never completed: its disk copies and, unless a domain there
        uses them, the guest image published for it go (a daemon the guest never reached is
        not one its lab's ``down`` visits). Through a new connection when the job's has
        died (a cut link: keepalive closed it); what cannot be deleted is said."""
        for fresh in (False, True):
            conn = None
            try:
                conn = open_uri(self.to_uri, self.record.name) if fresh else self.dconn
                remove_copies(conn, list(self._copies.values()), strict=True)
                self._copies = {}
                unpublish_unused(conn)
                return
            except (KvmlabError, libvirt.libvirtError):
                continue
            finally:
                if fresh and conn is not None:
                    with contextlib.suppress(libvirt.libvirtError):
                        conn.close()
        left = ", ".join(self._copies.values()) or "none"
        self._progress.step(
            f"cannot reach {self.to_uri} to delete what this migration put there (disk "
            f"copies: {left}; the guest image, unless a domain uses it): a later migration "
            f"there deletes it, or: virsh -c {self.to_uri} vol-list kvmlab"
        )

    def _job_running(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _join(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            self._worker.join(JOIN_S)

    def _release(self) -> None:
        if self._held:
            self._held = False
            release()

    def close(self) -> None:
        if self.dconn is not None and "dom" not in self._done and not self._job_running():
            self._clean_destination()
        self._release()
        for conn in (self.dconn, self.mconn):
            if conn is not None:
                with contextlib.suppress(libvirt.libvirtError):
                    conn.close()


def probe_files(source: LibvirtMachine, to_uri: str, xml: str) -> list[Where]:
    """Where the guest's heartbeats land: the probe channel's file of the source QEMU and,
    once libvirt has started it, of the destination's, each through its QEMU's root (a
    private daemon's mount namespace). None when a daemon is on another host: then only
    libvirt's and QEMU's downtime are known."""
    if source.pid is None or not (is_local(source.uri) and is_local(to_uri)):
        return []
    path = None
    for channel in ET.fromstring(xml).iterfind("devices/channel"):
        target, src = channel.find("target"), channel.find("source")
        if target is not None and target.get("name") == PROBE_PORT and src is not None:
            path = src.get("path")
    if not path:
        return []
    old = source.pid

    def destination() -> Path | None:
        for pid in find_marked(source.uuid):
            if pid != old and source.is_our_qemu(pid):
                return Path(f"/proc/{pid}/root{path}")
        return None

    return [Path(f"/proc/{old}/root{path}"), destination]


def _hint(error: str) -> str:
    """Why libvirt's QEMU may lack what a mode needs, when the error says so."""
    if "Postcopy is not supported" in error:
        try:
            sysctl = Path("/proc/sys/vm/unprivileged_userfaultfd").read_text().strip()
        except OSError:
            sysctl = "?"
        return (
            " (libvirt runs QEMU as its own user, which needs userfaultfd for postcopy: "
            f"vm.unprivileged_userfaultfd is {sysctl} here; 'sysctl -w "
            "vm.unprivileged_userfaultfd=1' allows it, or give that user /dev/userfaultfd)"
        )
    return ""


_STATES = {
    libvirt.VIR_DOMAIN_NOSTATE: "no state",
    libvirt.VIR_DOMAIN_RUNNING: "running",
    libvirt.VIR_DOMAIN_BLOCKED: "blocked",
    libvirt.VIR_DOMAIN_PAUSED: "paused",
    libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down",
    libvirt.VIR_DOMAIN_SHUTOFF: "shut off",
    libvirt.VIR_DOMAIN_CRASHED: "crashed",
    libvirt.VIR_DOMAIN_PMSUSPENDED: "suspended",
}


def _state_words(machine: LibvirtMachine) -> str:
    """The domain's state and libvirt's reason code, as evidence for a failure."""
    try:
        state, reason = machine.domain().state()
    except (libvirt.libvirtError, LibvirtFailure) as exc:
        return f"cannot tell ({exc})"
    return f"{_STATES.get(state, str(state))}, reason code {reason}"
