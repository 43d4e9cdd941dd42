"""``kvmlab migrate ADDRESS --to URI``: a libvirt guest moved to another libvirtd.

libvirt's own migration (``virDomainMigrate3``, managed by this client: libvirt talks to
both daemons, the QEMUs stream to each other) with the same dirtying workload and the same
checks as kvmlab's own migrations. Measured twice: libvirt's job statistics (what ``virsh
domjobinfo`` prints, polled during the job and the completed job's at the end) beside
QEMU's ``query-migrate`` on the source, read through libvirt's monitor passthrough (which
libvirt notes as a ``custom-monitor`` taint in the domain's log). The destination gets the
guest image through its own storage API first; the guest's record follows it (URI, pid).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import libvirt
import libvirt_qemu

from kvmlab.errors import KvmlabError, StateError, UsageError
from kvmlab.guest.kernel import default_cache_dir
from kvmlab.migrate import guestside
from kvmlab.migrate.engine_common import (
    Workload,
    check_fits,
    restore_forwards,
    running_source,
    start_workload,
    verify_after,
)
from kvmlab.migrate.jobinfo import job_stats
from kvmlab.migrate.modes import Settings, check_settings
from kvmlab.migrate.probe import STEADY_CEILING_S, HeartbeatWatch, Where, measure_downtime
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import parse
from kvmlab.proc.processes import find_marked
from kvmlab.proc.signals import deferred_signals
from kvmlab.render.devices.control import PROBE_PORT
from kvmlab.render.xmldom import QEMU_NS  # (importing it registers the XML prefixes)
from kvmlab.runtime import backends
from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe, is_local, open_uri
from kvmlab.runtime.libvirt.machine import LibvirtMachine
from kvmlab.runtime.libvirt.publish import VOLUME, hold, publish, release, unpublish_unused
from kvmlab.spec.backend import check_uri

Progress = Callable[[str], None]
SAMPLE_S = 0.2

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


def params_for(settings: Settings, dest_uri: str, xml: str) -> dict[str, Any]:
    """``virDomainMigrate3``'s typed parameters: the destination XML (its image paths),
    bandwidth, multifd channels; a loopback destination streams over loopback."""
    params: dict[str, Any] = {libvirt.VIR_MIGRATE_PARAM_DEST_XML: xml}
    if settings.bandwidth_mibs is not None:
        params[libvirt.VIR_MIGRATE_PARAM_BANDWIDTH] = int(settings.bandwidth_mibs)
    if settings.mode == "multifd" and settings.multifd_channels is not None:
        params[libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS] = settings.multifd_channels
    if settings.mode == "xbzrle":
        params[libvirt.VIR_MIGRATE_PARAM_COMPRESSION] = "xbzrle"
    if is_local(dest_uri):  # the daemon's host name may not resolve to this host
        params[libvirt.VIR_MIGRATE_PARAM_URI] = "tcp://127.0.0.1"
    return params


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
    for arg in root.iter(f"{{{QEMU_NS}}}arg") if same_host else ():
        value = arg.get("value", "")
        if not value.startswith("user,") or "hostfwd=" not in value:
            continue
        opts = value.split(",")
        netdev = next((o[3:] for o in opts if o.startswith("id=")), "")
        held += [(netdev, o[len("hostfwd=") :]) for o in opts if o.startswith("hostfwd=")]
        arg.set("value", ",".join(o for o in opts if not o.startswith("hostfwd=")))
    return ET.tostring(root, encoding="unicode"), held


def migrate_libvirt(
    address: str,
    to_uri: str,
    settings: Settings,
    workload: Workload,
    progress: Progress = lambda _: None,
) -> Outcome:
    """Migrate the libvirt guest at ``address`` to the daemon at ``to_uri``; verify it."""
    check_settings(settings)
    try:
        check_uri(to_uri)
    except ValueError as exc:
        raise UsageError(f"--to: {exc}") from None
    lab_dir, _, _ = running_source(address)
    with lab_dir.locked():
        _, guest_dir, record = running_source(address)
        source = backends.attach(guest_dir, record)
        if not isinstance(source, LibvirtMachine):
            raise UsageError(
                f"--to moves a guest of the libvirt backend; {address} runs on "
                "kvmlab's own QEMU (without --to it is migrated on this host)"
            )
        if to_uri == source.uri:
            raise UsageError(f"--to {to_uri}: {address} runs there already")
        check_fits(workload, record, address)
        if not source.is_alive():
            raise StateError(f"{address} is not running")
        live = ET.fromstring(source.domain().XMLDesc(0))
        if live.find("devices/disk") is not None:
            raise UsageError(
                f"{address} has disks: kvmlab migrates libvirt guests without "
                "disks so far (shared or copied storage is not set up)"
            )
        if live.find("devices/interface[@type='ethernet']") is not None:
            raise UsageError(
                f"{address} has tap NICs: on the destination they would not be on the lab's "
                "network (its bridge is in a namespace of this host) nor on your tap; "
                "kvmlab migrates libvirt guests with user NICs only so far"
            )
        dconn = open_uri(to_uri, record.name)
        try:
            return _migrate(source, dconn, to_uri, address, guest_dir, settings, workload, progress)
        finally:
            source.disconnect()
            with contextlib.suppress(libvirt.libvirtError):
                dconn.close()


def _migrate(
    source: LibvirtMachine,
    dconn: Any,
    to_uri: str,
    address: str,
    guest_dir: Any,
    settings: Settings,
    workload: Workload,
    progress: Progress,
) -> Outcome:
    t_start = time.monotonic()
    dom = source.domain()
    xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE)
    files = image_files(xml, address)
    where: dict[Path, Path] = {}
    released = [False]

    def let_go() -> None:
        if not released[0]:
            released[0] = True
            release()

    hold()  # the copies are unused until the job defines the domain there: see publish.LOCK
    try:
        if files:
            progress(f"publishing the guest image to {to_uri}")
            where = publish(dconn, to_uri, list(files.values()))
        return _job(
            source,
            dconn,
            to_uri,
            address,
            guest_dir,
            settings,
            workload,
            progress,
            dom,
            xml,
            files,
            where,
            t_start,
            let_go,
        )
    finally:
        let_go()


def _job(
    source: LibvirtMachine,
    dconn: Any,
    to_uri: str,
    address: str,
    guest_dir: Any,
    settings: Settings,
    workload: Workload,
    progress: Progress,
    dom: Any,
    xml: str,
    files: dict[str, Path],
    where: dict[Path, Path],
    t_start: float,
    let_go: Callable[[], None],
) -> Outcome:
    """The migration job with the dirtying workload, followed, then verified (``let_go``
    releases the publish lock once the job has ended)."""
    same_host = is_local(to_uri) and is_local(source.uri)
    beats = probe_files(source, to_uri, xml)
    xml, forwards = dest_xml(xml, {t: where[f] for t, f in files.items()}, same_host)
    flags = flags_for(settings, source.persistent)
    outcome = Outcome(
        address,
        f"libvirt {settings.mode} to {to_uri}",
        dirty_mib=workload.mem_mib,
        dirty_rate_mibs=workload.rate_mibs,
        source_qemu=source.uri,
        dest_qemu=to_uri,
    )
    ref = start_workload(source, address, workload, outcome, progress)
    dirtier, digest, klines = ref.dirtier, ref.digest, ref.klines
    if settings.downtime_limit_ms is not None:
        dom.migrateSetMaxDowntime(settings.downtime_limit_ms, 0)
    watch = HeartbeatWatch(beats) if beats else None
    progress(f"migrating {address} to {to_uri} (libvirt, {settings.mode})")
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["dom"] = dom.migrate3(dconn, params_for(settings, to_uri, xml), flags)
        except libvirt.libvirtError as exc:
            done["error"] = describe(exc)

    worker = threading.Thread(target=run, name="virDomainMigrate3", daemon=True)
    try:
        t_base = time.monotonic()
        if watch is not None:
            watch.start()
            time.sleep(1.0)  # the heartbeats' own noise, before the migration
        t0 = time.monotonic()
        worker.start()
        _follow(dom, worker, outcome, settings, t0)
        t_end = time.monotonic()
        if watch is not None and "dom" in done:  # until the destination's beats are steady
            gap, base = measure_downtime(watch, t_base, t0, t_end, STEADY_CEILING_S)
            outcome.guest_downtime_ms = gap.seconds * 1000 if gap else None
            outcome.baseline_gap_ms = base.seconds * 1000 if base else None
    except BaseException:
        outcome.interrupted = True
        with contextlib.suppress(libvirt.libvirtError):
            dom.abortJob()
        if worker.ident is not None:  # started
            worker.join(60)
        with deferred_signals(), contextlib.suppress(KvmlabError):
            where_now = source
            if "dom" in done:  # it completed all the same: the record follows the guest
                where_now = _follow_record(source, to_uri, guest_dir)
            guestside.stop_dirtier(where_now, dirtier)
        raise
    finally:
        let_go()
        if watch is not None:
            watch.stop()
        outcome.wall_seconds = time.monotonic() - t_start
    if "error" in done:
        outcome.status = "cancelled" if outcome.cancelled else "failed"
        outcome.error = done["error"] + _hint(done["error"])
        source_after = LibvirtMachine.from_record(guest_dir, source.record())
        outcome.source_resumed = source_after.is_alive()
        outcome.source_checks = verify_after(source_after, dirtier, digest, klines, "source")
        guestside.stop_dirtier(source_after, dirtier)
        return outcome
    outcome.status = "completed"
    new = done["dom"]
    with contextlib.suppress(libvirt.libvirtError):
        outcome.libvirt_job = job_stats(new.jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED))
    moved = _follow_record(source, to_uri, guest_dir)
    outcome.checks_after.extend(restore_forwards(lambda c: _hmp(moved, c), forwards))
    with contextlib.suppress(libvirt.libvirtError, LibvirtFailure):
        if source.connection is not None:
            unpublish_unused(source.connection)  # the source daemon's copies, unused now
    t_verify = time.monotonic()
    outcome.checks_after.extend(verify_after(moved, dirtier, digest, klines, "destination"))
    outcome.verify_seconds += time.monotonic() - t_verify
    with contextlib.suppress(KvmlabError):
        guestside.stop_dirtier(moved, dirtier)
    moved.disconnect()
    return outcome


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


def _follow(
    dom: Any, worker: threading.Thread, outcome: Outcome, settings: Settings, t0: float
) -> None:
    """Sample libvirt's job and QEMU's ``query-migrate`` until the job ends; switch to
    postcopy after the pass asked for; give up (abort) after ``max_seconds``."""
    while worker.is_alive():
        t = time.monotonic() - t0
        with contextlib.suppress(libvirt.libvirtError):
            job = job_stats(dom.jobStats(0))
            if job:
                outcome.libvirt_samples.append({"t": t, **job})
        with contextlib.suppress(libvirt.libvirtError, ValueError, KeyError):
            reply = json.loads(
                libvirt_qemu.qemuMonitorCommand(dom, '{"execute": "query-migrate"}', 0)
            )["return"]
            outcome.samples.append(parse(reply, t))
            outcome.raw_last = reply
        passes = outcome.samples[-1].get("dirty-sync-count") if outcome.samples else None
        if (
            settings.mode == "postcopy"
            and outcome.postcopy_started is None
            and passes
            and passes > settings.postcopy_after_pass
        ):
            with contextlib.suppress(libvirt.libvirtError):
                dom.migrateStartPostCopy(0)
                outcome.postcopy_started = t
        if (
            t > settings.max_seconds
            and outcome.cancelled is None
            and (outcome.postcopy_started is None)
        ):
            _on_timeout(dom, outcome, settings, t)
        worker.join(SAMPLE_S)


def _on_timeout(dom: Any, outcome: Outcome, settings: Settings, t: float) -> None:
    """Past ``--max-time``: switch to postcopy when asked (as kvmlab's own path does), else,
    or when libvirt refuses the switch, abort the job."""
    if settings.on_timeout == "postcopy":
        try:
            dom.migrateStartPostCopy(0)
        except libvirt.libvirtError as exc:
            outcome.cancelled = (
                f"not converged in {settings.max_seconds:g} s, and libvirt "
                f"refused the switch to postcopy: {describe(exc)}"
            )
        else:
            outcome.postcopy_started = t
            outcome.choice = (
                f"not converged in {settings.max_seconds:g} s: switched to "
                "postcopy (--on-timeout postcopy)"
            )
            return
    else:
        outcome.cancelled = f"still running after {settings.max_seconds:g} s"
    with contextlib.suppress(libvirt.libvirtError):
        dom.abortJob()


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


def _hmp(machine: LibvirtMachine, command: str) -> str:
    """An HMP command through libvirt's monitor passthrough."""
    try:
        return str(
            libvirt_qemu.qemuMonitorCommand(
                machine.domain(), command, libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP
            )
        )
    except libvirt.libvirtError as exc:
        raise LibvirtFailure(
            f"HMP {command!r}: {describe(exc)}", machine.uri, machine.config.name
        ) from None


def _follow_record(source: LibvirtMachine, to_uri: str, guest_dir: Any) -> LibvirtMachine:
    """The guest's record moved to the destination daemon (URI, QEMU's pid there: on one
    host the source's QEMU, same UUID, may not have exited yet and is not it)."""
    record = source.record()
    old = record.pid
    record.backend_fields["uri"], record.pid, record.pid_start = to_uri, 0, None
    moved = LibvirtMachine.from_record(guest_dir, record)
    moved.find_pid(exclude=old)
    record = moved.record()
    record.save(guest_dir)
    if not moved.is_alive():
        raise LibvirtFailure(
            "the domain does not run on the destination after libvirt completed the "
            f"migration (libvirt says: {_state_words(moved)})",
            to_uri,
            record.name,
        )
    return moved


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
