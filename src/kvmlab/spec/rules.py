"""Checks across fields that a type alone cannot express.

Each rule yields ``(key path, message)`` pairs so that one pass reports every
problem of a lab, each naming the exact key a user has to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import PurePosixPath

from kvmlab.spec.bench import (
    EXIT_KINDS,
    LAB_WORKLOADS,
    MIGRATION_METRICS,
    MIGRATION_PREFIX,
    PVP_HOPS,
    SUITE_METRICS,
)
from kvmlab.spec.devices import TapNic, UserNic, VhostUserNic
from kvmlab.spec.lab import Guest, Lab
from kvmlab.spec.machine import HUGEPAGE_BYTES, HYPERV_NEEDS
from kvmlab.spec.names import MAX_DEPTH
from kvmlab.spec.network import check_networks
from kvmlab.spec.units import format_cpuset, format_size

Finding = tuple[str, str]
GuestRule = Callable[[str, Guest], Iterator[Finding]]


def guest_key(path: tuple[str, ...]) -> str:
    """The key path of a guest: ``("l1", "l2")`` -> ``guests.l1.guests.l2``."""
    return ".".join(f"guests.{name}" for name in path)


def _topology(key: str, g: Guest) -> Iterator[Finding]:
    cpu = g.cpu
    if cpu.topology_given:
        product = (cpu.sockets or 1) * (cpu.cores or 1) * (cpu.threads or 1)
        if product != g.vcpus:
            yield (
                f"{key}.cpu",
                f"sockets x cores x threads = {product} but vcpus = {g.vcpus}; they must match",
            )


def _pinning(key: str, g: Guest) -> Iterator[Finding]:
    pinned: dict[int, str] = {}
    for vcpu in g.pinning.vcpus:
        where = f"{key}.pinning.vcpus.{vcpu if len(vcpu) <= 12 else vcpu[:12] + '...'}"
        if not (vcpu.isascii() and vcpu.isdigit()):
            yield where, "keys are vCPU numbers such as 0: write the vCPU's number"
        elif len(vcpu) > 3 or int(vcpu) >= g.vcpus:
            shown = vcpu if len(vcpu) <= 12 else f"of {len(vcpu)} digits"
            yield (
                where,
                f"vCPU {shown} does not exist; the guest has {g.vcpus} vCPU(s), "
                f"numbered 0-{g.vcpus - 1}: pin those",
            )
        elif int(vcpu) in pinned:
            yield (
                where,
                f"pins vCPU {int(vcpu)} again (also as {pinned[int(vcpu)]!r}): pin each vCPU once",
            )
        else:
            pinned[int(vcpu)] = vcpu


def _memory(key: str, g: Guest) -> Iterator[Finding]:
    mem = g.memory
    page = HUGEPAGE_BYTES[mem.hugepage_size]
    if mem.backing == "hugepages" and mem.size % page:
        yield (
            f"{key}.memory.size",
            f"{format_size(mem.size)} is not a whole number of {mem.hugepage_size} huge pages",
        )
    if mem.backing != "hugepages" and mem.hugepage_size != "2M":
        yield f"{key}.memory.hugepage_size", 'has no effect unless backing = "hugepages"'
    if mem.backing == "anonymous" and mem.shared:
        yield (
            f"{key}.memory.shared",
            'shared RAM needs a file descriptor to share: set backing = "memfd" or "hugepages"',
        )
    if not mem.numa:
        return
    seen: set[int] = set()
    for i, cell in enumerate(mem.numa):
        cell_key = f"{key}.memory.numa[{i}]"
        beyond = [c for c in cell.cpus if c >= g.vcpus]
        if beyond:
            yield (
                f"{cell_key}.cpus",
                f"vCPU(s) {format_cpuset(tuple(beyond))} do not exist; the guest has "
                f"{g.vcpus} vCPU(s)",
            )
        twice = seen.intersection(cell.cpus)
        if twice:
            yield f"{cell_key}.cpus", f"vCPU(s) {format_cpuset(tuple(twice))} are in two cells"
        seen.update(cell.cpus)
        if mem.backing == "hugepages" and cell.memory % page:
            yield (
                f"{cell_key}.memory",
                f"{format_size(cell.memory)} is not a whole number of {mem.hugepage_size} pages",
            )
        if cell.mem_access == "shared" and mem.backing == "anonymous":
            yield (
                f"{cell_key}.mem_access",
                'shared RAM needs backing = "memfd" or "hugepages"',
            )
    missing = sorted(set(range(g.vcpus)) - seen)
    if missing:
        yield (
            f"{key}.memory.numa",
            f"vCPU(s) {format_cpuset(tuple(missing))} are in no NUMA cell",
        )
    total = sum(c.memory for c in mem.numa)
    if total != mem.size:
        yield (
            f"{key}.memory.numa",
            f"cells add up to {format_size(total)} but memory.size is {format_size(mem.size)}",
        )


def _nics(key: str, g: Guest) -> Iterator[Finding]:
    for i, nic in enumerate(g.nics):
        nic_key = f"{key}.nics[{i}]"
        if nic.queues > 1 and nic.model != "virtio":
            yield f"{nic_key}.queues", f'multiqueue needs model = "virtio", not {nic.model!r}'
        if isinstance(nic, UserNic) and nic.queues > 1:
            yield f"{nic_key}.queues", "user networking has a single queue pair"
        if nic.queues > 2 * g.vcpus:
            yield (
                f"{nic_key}.queues",
                f"{nic.queues} queue pairs for {g.vcpus} vCPU(s): at most 2 x vCPUs "
                f"= {2 * g.vcpus}",
            )
        if nic.model != "virtio" and (nic.rx_queue_size or nic.tx_queue_size):
            yield f"{nic_key}.model", "ring sizes apply to virtio NICs only"
        if nic.tx_queue_size and not isinstance(nic, VhostUserNic):
            yield (
                f"{nic_key}.tx_queue_size",
                "QEMU honours a TX ring size only for vhost-user NICs",
            )
        if isinstance(nic, VhostUserNic):
            if nic.model != "virtio":
                yield f"{nic_key}.model", 'vhost-user needs model = "virtio"'
            if not g.memory.shared_anywhere or g.memory.backing == "anonymous":
                yield (
                    nic_key,
                    "vhost-user needs guest RAM the switch can map: set memory.backing = "
                    '"memfd" or "hugepages" and memory.shared = true '
                    '(or numa cells with mem_access = "shared")',
                )
            if nic.reconnect is not None and nic.mode == "server":
                yield f"{nic_key}.reconnect", 'reconnect applies to mode = "client" only'


def _disks(key: str, g: Guest) -> Iterator[Finding]:
    for i, disk in enumerate(g.disks):
        if disk.mount is not None:
            if g.boot != "image":
                yield f"{key}.disks[{i}].mount", 'is done by the default image: boot = "image"'
            if disk.bus != "virtio-blk" or disk.readonly:
                yield f"{key}.disks[{i}].mount", "needs a writable virtio-blk disk"
        if disk.aio == "native" and disk.cache not in ("none", "directsync"):
            yield (
                f"{key}.disks[{i}].aio",
                f'aio = "native" needs cache = "none" or "directsync" (O_DIRECT), '
                f"not {disk.cache!r}",
            )


def _boot(key: str, g: Guest) -> Iterator[Finding]:
    if g.boot == "kernel" and g.kernel is None:
        yield f"{key}.kernel", 'boot = "kernel" needs the kernel to boot'
    if g.boot != "kernel":
        for name in ("kernel", "initrd"):
            if getattr(g, name) is not None:
                yield f"{key}.{name}", f'is only used with boot = "kernel", not {g.boot!r}'
    if g.cloud_init is not None and g.boot != "disk":
        yield f"{key}.cloud_init", 'a cloud-init seed is for boot = "disk" guests'
    if g.boot == "disk" and not g.disks:
        yield f"{key}.boot", 'boot = "disk" needs at least one disk'
    if g.boot == "disk" and g.append is not None:
        yield f"{key}.append", 'a disk boots its own kernel command line; append needs "kernel"'
    if g.boot != "image" and (g.host_view.hide or g.host_view.show):
        yield f"{key}.host_view", 'only the default image shares the host: boot = "image"'
    for i, path in enumerate(g.host_view.hide):
        if path == "/":
            yield f"{key}.host_view.hide[{i}]", "would hide the guest's whole root"
    if g.migratable and g.boot != "image":
        yield f"{key}.migratable", 'selects the self-contained default image: boot = "image"'
    if g.migratable and g.nested:
        yield f"{key}.migratable", "kvmlab does not migrate guest hypervisors (nested state)"
    if g.migratable and (g.host_view.hide or g.host_view.show):
        yield f"{key}.host_view", "a migratable guest shares nothing of the host"
    if g.machine == "microvm" and g.boot == "disk":
        yield f"{key}.boot", 'microvm boots a kernel directly: use boot = "image" or "kernel"'
    if g.machine == "microvm":
        for i, nic in enumerate(g.nics):
            if nic.model != "virtio":
                yield f"{key}.nics[{i}].model", "microvm has virtio devices only"


def _clock(key: str, g: Guest) -> Iterator[Finding]:
    timers = g.clock.timers
    allowed = {"rtc": ("catchup", "delay"), "pit": ("delay", "discard")}
    for name in ("rtc", "pit", "hpet", "kvmclock", "hypervclock"):
        timer = getattr(timers, name)
        policy = timer.tickpolicy
        if policy is not None and policy not in allowed.get(name, ()):
            options = " or ".join(allowed.get(name, ())) or "none"
            yield (
                f"{key}.clock.timers.{name}.tickpolicy",
                f"{policy!r} is not supported for {name} (supported: {options})",
            )
    if timers.rtc.present is False:
        yield f"{key}.clock.timers.rtc.present", "the RTC cannot be removed from a PC machine"
    if g.machine == "microvm" and timers.hpet.present:
        yield f"{key}.clock.timers.hpet.present", "microvm has no HPET"
    if g.accel == "tcg" and timers.kvmclock.present:
        yield f"{key}.clock.timers.kvmclock.present", 'kvmclock needs KVM, but accel = "tcg"'
    if timers.hypervclock.present and g.hyperv is None:
        yield (
            f"{key}.clock.timers.hypervclock",
            "the Hyper-V clock needs Hyper-V enlightenments: add a [hyperv] table",
        )


def _hyperv(key: str, g: Guest) -> Iterator[Finding]:
    if g.hyperv is None:
        return
    have: set[str] = set(g.hyperv.features)
    if g.clock.timers.hypervclock.present:
        have.add("time")
    for feature in g.hyperv.features:
        for need in HYPERV_NEEDS.get(feature, ()):
            if need not in have:
                what = "clock.timers.hypervclock.present = true" if need == "time" else need
                yield f"{key}.hyperv.features", f"{feature!r} needs {what}"


def _children(key: str, g: Guest) -> Iterator[Finding]:
    if g.guests and not g.nested:
        yield f"{key}.guests", "only a guest hypervisor (nested = true) can hold guests"
    if g.guests:
        inner = sum(child.memory.size for child in g.guests.values())
        if inner >= g.memory.size:
            yield (
                f"{key}.memory.size",
                f"{format_size(g.memory.size)} cannot hold its guests' "
                f"{format_size(inner)} plus its own kernel",
            )


GUEST_RULES: tuple[GuestRule, ...] = (
    _topology,
    _pinning,
    _memory,
    _nics,
    _disks,
    _boot,
    _clock,
    _hyperv,
    _children,
)


def _unique(lab: Lab) -> Iterator[Finding]:
    """Things two NICs or disks of one lab must not share."""
    owners: dict[tuple[str, str], str] = {}

    def claim(kind: str, value: str, where: str, what: str, scope: str = "") -> Iterator[Finding]:
        first = owners.setdefault((kind, f"{scope}:{value}"), where)
        if first != where:
            yield where, f"{what} {value} is already used by {first}"

    for path, guest in lab.walk():
        key = guest_key(path)
        for i, nic in enumerate(guest.nics):
            nic_key = f"{key}.nics[{i}]"
            if nic.mac:
                yield from claim("mac", nic.mac, f"{nic_key}.mac", "MAC")
            if isinstance(nic, VhostUserNic) and nic.socket is not None:
                sock = str(PurePosixPath(nic.socket))
                yield from claim("sock", sock, f"{nic_key}.socket", "socket")
            if isinstance(nic, VhostUserNic) and nic.port is not None:
                yield from claim("swport", nic.port, f"{nic_key}.port", "switch port")
            if isinstance(nic, TapNic) and nic.ifname and len(path) == 1:
                yield from claim("tap", nic.ifname, f"{nic_key}.ifname", "tap device")
            if isinstance(nic, UserNic) and len(path) == 1:
                for j, fwd in enumerate(nic.forwards):
                    port = f"{fwd.proto}:{fwd.host_addr}:{fwd.host_port}"
                    yield from claim("port", port, f"{nic_key}.forwards[{j}]", "host port")
        for i, disk in enumerate(guest.disks):
            if not disk.readonly:
                scope = "/".join(path[:-1])
                where = f"{key}.disks[{i}].path"
                yield from claim("disk", disk.path, where, "writable image", scope)


def check_lab(lab: Lab) -> list[Finding]:
    """Every cross-field problem of ``lab`` as ``(key path, message)``, in file order."""
    found: list[Finding] = []
    for path, guest in lab.walk():
        key = guest_key(path)
        if len(path) == MAX_DEPTH + 1:  # said once, at the first guest too deep
            found.append(
                (
                    key,
                    f"guests nest at most {MAX_DEPTH} levels (L1 to L{MAX_DEPTH}); "
                    f"this one would be L{len(path)}",
                )
            )
        for rule in GUEST_RULES:
            found.extend(rule(key, guest))
    found.extend(_unique(lab))
    found.extend(
        (
            f"{guest_key(path)}.libvirt_uri",
            "a guest inside a guest hypervisor runs "
            "where its guest hypervisor runs: only top-level guests name a daemon",
        )
        for path, guest in lab.walk()
        if len(path) > 1 and guest.libvirt_uri
    )
    found.extend(_migrations(lab))
    found.extend(_headlines(lab))
    found.extend(_switch(lab))
    found.extend(check_networks(lab))
    return found


RESERVED_PORT_PREFIX = "kvmlab-"
"""Switch ports kvmlab adds itself (the PVP generator and sink) are named ``kvmlab-...``."""


def switch_ports(guest: Guest) -> list[tuple[int, VhostUserNic]]:
    """The guest's NICs on ports of the lab's switch, with their index."""
    return [
        (i, n)
        for i, n in enumerate(guest.nics)
        if isinstance(n, VhostUserNic) and n.port is not None
    ]


def _switch(lab: Lab) -> Iterator[Finding]:
    sw = lab.switch
    for path, guest in lab.walk():
        for i, nic in switch_ports(guest):
            key = f"{guest_key(path)}.nics[{i}]"
            if sw is None:
                yield f"{key}.port", "names a switch port, but the lab has no [switch]"
                continue
            if len(path) > 1:
                yield f"{key}.port", "only top-level guests reach the host's switch"
            assert nic.port is not None
            if nic.port.startswith(RESERVED_PORT_PREFIX):
                yield f"{key}.port", f"port names starting {RESERVED_PORT_PREFIX!r} are kvmlab's"
            if nic.queues != sw.queues:
                yield (
                    f"{key}.queues",
                    f"{nic.queues} queue pair(s), but switch.queues is {sw.queues}: set both alike",
                )
            need = "client" if sw.kind == "testpmd" else "server"
            if "mode" in nic.model_fields_set and nic.mode != need:
                yield (
                    f"{key}.mode",
                    f"a {sw.kind} switch port needs QEMU as the socket "
                    f"{need} (leave mode out: kvmlab sets it)",
                )
    if sw is not None and sw.main_core in sw.cores:
        yield "switch.main_core", f"CPU {sw.main_core} is also in switch.cores"
    pvp = lab.bench.pvp
    if pvp.guest is not None:
        pvp_guest = lab.guests.get(pvp.guest)
        if pvp_guest is None:
            yield "bench.pvp.guest", f"no top-level guest {pvp.guest!r}"
        elif len(switch_ports(pvp_guest)) < 2:
            yield (
                "bench.pvp.guest",
                (
                    f"guest {pvp.guest} needs two vhost-user NICs on switch "
                    "ports (port = ...) to forward between"
                ),
            )
        if sw is None:
            yield "bench.pvp.guest", "PVP runs through the lab's [switch]; the lab has none"
    if pvp.compare_tuning and lab.tuning is None:
        yield "bench.pvp.compare_tuning", "compares with the lab's [tuning]; the lab has none"


def _migrations(lab: Lab) -> Iterator[Finding]:
    seen: set[str] = set()
    for i, m in enumerate(lab.migrations):
        key = f"migrations[{i}]"
        if m.name in seen:
            yield f"{key}.name", f"another migration is named {m.name!r}"
        seen.add(m.name)
        guest = lab.guests.get(m.guest)
        if guest is None:
            yield f"{key}.guest", f"no top-level guest {m.guest!r} (kvmlab migrates those only)"
        elif not guest.migratable:
            yield f"{key}.guest", f"guest {m.guest} needs migratable = true (9p blocks migration)"
        elif any(isinstance(n, TapNic) and not n.network for n in guest.nics):
            yield (
                f"{key}.guest",
                f"guest {m.guest} has a tap of its own (not on a lab network): the source "
                "QEMU holds it, and a second QEMU on this host cannot open it",
            )


def _headlines(lab: Lab) -> Iterator[Finding]:
    """Each ``[bench] headline`` names a workload the lab runs and a metric it stores."""
    bench = lab.bench
    chosen = set(bench.workloads)
    migrations = [m.name for m in lab.migrations]
    for i, item in enumerate(bench.headline):
        key = f"bench.headline[{i}]"
        workload, _, metric = item.partition(".")
        runs = workload
        if workload.startswith(MIGRATION_PREFIX):
            name, runs = workload.removeprefix(MIGRATION_PREFIX), "migrations"
            if name not in migrations:
                have = ", ".join(migrations) or "none"
                yield (
                    key,
                    f"{item!r}: the lab has no migration {name!r} (its [[migrations]]: "
                    f"{have}): name one of them or add it",
                )
                continue
        elif workload == "migrations":
            example = f"migrate {migrations[0] if migrations else 'NAME'}.total time"
            yield (
                key,
                f"{item!r}: migrations are stored as 'migrate NAME', one per [[migrations]] "
                f"entry: write e.g. {example!r}",
            )
            continue
        if chosen and runs in (*SUITE_METRICS, *LAB_WORKLOADS) and runs not in chosen:
            yield (
                key,
                f"{item!r}: [bench] workloads leaves out {runs}, so no run has it: add {runs} "
                "to workloads or drop this headline",
            )
            continue
        why = _not_run(lab, runs)
        if why:
            yield key, f"{item!r}: {why}"
            continue
        known = _metrics_of(lab, runs)
        if known is not None and metric not in known:
            yield (
                key,
                f"{item!r}: {workload} stores no metric {metric!r}: name one it stores, "
                f"{', '.join(known[:12])}{', ...' if len(known) > 12 else ''}",
            )


def _not_run(lab: Lab, workload: str) -> str | None:
    """Why the lab never runs ``workload`` (None: it may)."""
    if workload == "exits" and not lab.bench.exit_profile:
        return (
            "exits rows come from [bench] exit_profile, which is 0: set it (seconds) or drop "
            "this headline"
        )
    if workload == "exits" and not any(len(path) > 1 for path, _ in lab.walk()):
        return (
            "exits profiles guests inside a guest hypervisor, and the lab has none: add one "
            "or drop this headline"
        )
    if workload == "pvp" and lab.switch is None:
        return (
            "pvp runs through the lab's [switch], and the lab has none: add one or drop this "
            "headline"
        )
    return None


def _metrics_of(lab: Lab, workload: str) -> list[str] | None:
    """The metrics ``workload`` stores for this lab (None: they depend on more than the
    lab, e.g. netcompare's network paths)."""
    if workload in SUITE_METRICS:
        return list(SUITE_METRICS[workload])
    if workload == "exits":
        return ["all_per_s", *(f"{kind}_per_s" for kind in EXIT_KINDS)]
    if workload == "migrations":
        return list(MIGRATION_METRICS)
    if workload == "pvp":
        frames = lab.bench.pvp.frame_sizes
        return [
            f"{frame}B {name}"
            for frame in frames
            for hop in PVP_HOPS
            for name in (hop, f"{hop} lost")
        ] + [
            f"{frame}B {name}" for frame in frames for name in ("loss", "received per switch core")
        ]
    return None
