"""A libvirt domain's XML (``virsh dumpxml``) as a lab with one guest."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from kvmlab.errors import UsageError, printable
from kvmlab.spec.importing.common import (
    AIO,
    CACHES,
    DEFAULT_QEMU,
    HYPERV,
    QUIET_DEVICES,
    TICKPOLICIES,
    TIMERS,
    Imported,
    bytes_of,
    lab_name_from,
    naming_source,
    parse_xml,
    size_text,
)


def _from_domain_xml(text: str, source: str, boot_image: bool = False) -> Imported:
    """A libvirt domain's XML as a lab with one guest. ``boot_image``: boot kvmlab's own
    image instead of the domain's disk or kernel, and attach none of its disks (its shape
    without its contents, for a host that lacks them)."""
    root = parse_xml(text, source)
    name_el = root.find("name")
    raw_name = (name_el.text or "").strip() if name_el is not None else ""
    if not raw_name:
        raise UsageError(f"{source}: the domain has no <name>; give virsh dumpxml's output")
    name = lab_name_from(raw_name)
    guest: dict[str, Any] = {}
    out = Imported({"name": name, "description": "", "guests": {name: guest}}, source)
    out.doc["description"] = f"Imported from libvirt domain {printable(raw_name)} ({source})"
    if name != raw_name:
        out.changed.append(f"name {printable(raw_name)!r} is {name!r} (kvmlab's names)")
    _domain_type(root, guest, out)
    _os(root, guest, out, boot_image)
    _cpu(root, guest, out)
    _memory(root, guest, out)
    _cputune(root, guest, out)
    _clock(root, guest, out)
    _features(root, guest, out)
    _devices(root, guest, out, boot_image)
    _other_elements(root, out)
    return out


def _domain_type(root: ET.Element, guest: dict[str, Any], out: Imported) -> None:
    kind = root.get("type", "kvm")
    if kind not in ("kvm", "qemu"):
        raise UsageError(
            f"{out.source}: a domain of type {printable(kind)!r}; kvmlab runs QEMU guests "
            "(kvm or qemu)"
        )
    if kind == "qemu":
        guest["accel"] = "tcg"
    else:
        out.changed.append(
            "domain type kvm is accel = 'auto': KVM where this host's KVM serves a stock "
            "kernel, TCG otherwise (kvmlab check says which)"
        )


def _os(root: ET.Element, guest: dict[str, Any], out: Imported, boot_image: bool) -> None:
    os_el = root.find("os")
    type_el = os_el.find("type") if os_el is not None else None
    arch = type_el.get("arch", "x86_64") if type_el is not None else "x86_64"
    if arch != "x86_64":
        raise UsageError(f"{out.source}: arch {printable(arch)}; kvmlab runs x86_64 guests")
    machine = type_el.get("machine", "") if type_el is not None else ""
    if "q35" in machine:
        guest["machine"] = "q35"
    elif machine.startswith("pc") or machine == "":
        guest["machine"] = "pc"
    elif machine == "microvm":
        guest["machine"] = "microvm"
    else:
        guest["machine"] = "q35"
    if machine not in ("q35", "pc", "microvm", ""):
        out.changed.append(
            f"machine {printable(machine)} is {guest['machine']} (QEMU's newest version of it)"
        )
    if os_el is None:
        return
    firmware = os_el.get("firmware") or (os_el.find("loader") is not None and "loader")
    if firmware:
        out.left_out.append(f"firmware {printable(str(firmware))} (kvmlab boots SeaBIOS)")
    kernel = os_el.findtext("kernel")
    if boot_image:
        guest["boot"] = "image"
        if kernel:
            out.left_out.append(f"its kernel {printable(kernel)} (booting kvmlab's image)")
        return
    if kernel:
        guest["boot"] = "kernel"
        guest["kernel"] = kernel
        initrd = os_el.findtext("initrd")
        if initrd:
            guest["initrd"] = initrd
        cmdline = os_el.findtext("cmdline")
        if cmdline:
            guest["append"] = cmdline


def _cpu(root: ET.Element, guest: dict[str, Any], out: Imported) -> None:
    vcpu_el = root.find("vcpu")
    vcpus = int((vcpu_el.text or "1").strip()) if vcpu_el is not None else 1
    if vcpu_el is not None and vcpu_el.get("current") not in (None, str(vcpus)):
        out.changed.append(
            f"{vcpu_el.get('current')} of {vcpus} vCPUs online is all {vcpus} (no hot-plug)"
        )
    if vcpu_el is not None and vcpu_el.get("cpuset"):
        out.left_out.append(f"vcpu cpuset {vcpu_el.get('cpuset')} (use pinning.vcpus)")
    guest["vcpus"] = vcpus
    cpu_el = root.find("cpu")
    cpu: dict[str, Any] = {}
    if cpu_el is None:
        cpu.update(model="qemu64", sockets=vcpus, cores=1, threads=1)  # QEMU's, libvirt's
    else:
        mode = cpu_el.get("mode", "custom")
        if mode in ("host-passthrough", "host-model"):
            cpu["model"] = mode
        elif mode == "maximum":
            cpu["model"] = "max"
        else:
            model = cpu_el.findtext("model")
            if model:
                cpu["model"] = model.strip()
            else:
                out.changed.append("a custom <cpu> without a model is host-passthrough")
        features = []
        for feature in cpu_el.findall("feature"):
            policy, fname = feature.get("policy", "require"), feature.get("name", "")
            if policy in ("require", "force"):
                features.append(f"+{fname}")
            elif policy in ("disable", "forbid"):
                features.append(f"-{fname}")
            else:
                out.left_out.append(f"cpu feature {printable(fname)} policy {policy}")
        if features:
            cpu["features"] = features
        topo = cpu_el.find("topology")
        if topo is None:
            cpu.update(sockets=vcpus, cores=1, threads=1)
            out.changed.append(
                f"no <topology>: libvirt's default ({vcpus} socket(s) of 1 core) written out, "
                "as QEMU's own default differs (1 socket of N cores)"
            )
        else:
            if topo.get("dies", "1") != "1":
                out.left_out.append(f"{topo.get('dies')} dies per socket (one die)")
            for key in ("sockets", "cores", "threads"):
                if topo.get(key):
                    cpu[key] = int(topo.get(key, "1"))
        numa = cpu_el.find("numa")
        if numa is not None:
            guest.setdefault("memory", {})["numa"] = [
                {
                    "cpus": cell.get("cpus", "0"),
                    "memory": size_text(
                        bytes_of(cell.get("memory"), cell.get("unit"), "numa cell memory")
                    ),
                    **({"mem_access": "shared"} if cell.get("memAccess") == "shared" else {}),
                }
                for cell in numa.findall("cell")
            ]
    if cpu:
        guest["cpu"] = cpu


def _memory(root: ET.Element, guest: dict[str, Any], out: Imported) -> None:
    mem_el = root.find("memory")
    size = bytes_of(
        mem_el.text if mem_el is not None else "1048576",
        mem_el.get("unit") if mem_el is not None else None,
        "memory",
    )
    memory: dict[str, Any] = guest.setdefault("memory", {})
    cells = memory.get("numa", [])
    if cells:
        total = sum(bytes_of(c["memory"][:-1], c["memory"][-1], "cell") for c in cells)
        if total != size:
            out.changed.append(
                f"memory {size_text(size)} is {size_text(total)}, the sum of its NUMA cells (as "
                "libvirt itself sizes such a domain)"
            )
            size = total
    memory["size"] = size_text(size)
    current = root.find("currentMemory")
    if current is not None and bytes_of(current.text, current.get("unit"), "currentMemory") < size:
        out.left_out.append("currentMemory below memory (ballooned down): all of it is given")
    backing = root.find("memoryBacking")
    if backing is None:
        return
    huge = backing.find("hugepages")
    if huge is not None:
        memory["backing"] = "hugepages"
        page = huge.find("page")
        page_bytes = (
            bytes_of(page.get("size"), page.get("unit"), "hugepage size")
            if page is not None
            else 2 << 20
        )
        memory["hugepage_size"] = "1G" if page_bytes == 1 << 30 else "2M"
        if page_bytes not in (1 << 30, 2 << 20):
            out.changed.append(f"huge pages of {page_bytes} bytes are 2M pages")
    source = backing.find("source")
    if source is not None and source.get("type") == "memfd" and huge is None:
        memory["backing"] = "memfd"
    access = backing.find("access")
    if access is not None and access.get("mode") == "shared":
        memory["shared"] = True
    allocation = backing.find("allocation")
    if allocation is not None and allocation.get("mode") == "immediate":
        memory["prealloc"] = True
    for child in backing:
        if child.tag not in ("hugepages", "source", "access", "allocation"):
            out.left_out.append(f"memoryBacking <{printable(child.tag)}>")


def _cputune(root: ET.Element, guest: dict[str, Any], out: Imported) -> None:
    tune = root.find("cputune")
    if tune is None:
        return
    pinning: dict[str, Any] = {}
    vcpus = {pin.get("vcpu", "0"): pin.get("cpuset", "") for pin in tune.findall("vcpupin")}
    if vcpus:
        pinning["vcpus"] = vcpus
    emulator = tune.find("emulatorpin")
    if emulator is not None and emulator.get("cpuset"):
        pinning["emulator"] = emulator.get("cpuset")
    if pinning:
        guest["pinning"] = pinning
    for child in tune:
        if child.tag not in ("vcpupin", "emulatorpin"):
            out.left_out.append(f"cputune <{printable(child.tag)}>")


def _clock(root: ET.Element, guest: dict[str, Any], out: Imported) -> None:
    clock_el = root.find("clock")
    if clock_el is None:
        return
    clock: dict[str, Any] = {}
    offset = clock_el.get("offset", "utc")
    if offset in ("utc", "localtime"):
        clock["offset"] = offset
    else:
        out.changed.append(f"clock offset {printable(offset)} is utc")
    timers: dict[str, Any] = {}
    for timer in clock_el.findall("timer"):
        tname = timer.get("name", "")
        if tname not in TIMERS:
            out.left_out.append(f"timer {printable(tname)}")
            continue
        entry: dict[str, Any] = {}
        if timer.get("present") in ("yes", "no"):
            entry["present"] = timer.get("present") == "yes"
        if timer.get("tickpolicy") in TICKPOLICIES:
            entry["tickpolicy"] = timer.get("tickpolicy")
        if entry:
            timers[tname] = entry
    if timers:
        clock["timers"] = timers
    guest["clock"] = clock


def _features(root: ET.Element, guest: dict[str, Any], out: Imported) -> None:
    features = root.find("features")
    if features is None:
        return
    for child in features:
        if child.tag in ("acpi", "apic", "pae"):
            continue
        if child.tag != "hyperv":
            out.left_out.append(f"feature <{printable(child.tag)}>")
            continue
        names = []
        for hv in child:
            if hv.get("state", "on") != "on":
                continue
            if hv.tag in HYPERV:
                names.append(hv.tag)
                if hv.tag == "spinlocks" and hv.get("retries"):
                    guest.setdefault("hyperv", {})["spinlock_retries"] = int(
                        hv.get("retries", "8191")
                    )
            else:
                out.left_out.append(f"Hyper-V <{printable(hv.tag)}>")
        if names:
            guest.setdefault("hyperv", {})["features"] = names


def _devices(root: ET.Element, guest: dict[str, Any], out: Imported, boot_image: bool) -> None:
    devices = root.find("devices")
    if devices is None:
        return
    emulator = devices.findtext("emulator")
    if emulator and emulator.strip() != DEFAULT_QEMU:
        guest["qemu"] = emulator.strip()
    quiet: list[str] = []
    disks: list[dict[str, Any]] = []
    nics: list[dict[str, Any]] = []
    scsi = any(
        c.get("type") == "scsi" and c.get("model") == "virtio-scsi"
        for c in devices.findall("controller")
    )
    for dev in devices:
        if dev.tag == "disk":
            disk = _disk(dev, out, scsi)
            if disk is not None:
                disks.append(disk)
        elif dev.tag == "interface":
            nic = _interface(dev, out)
            if nic is not None:
                nics.append(nic)
        elif (
            dev.tag == "channel"
            and dev.find("target") is not None
            and (
                dev.find("target").get("name") == "org.qemu.guest_agent.0"  # type: ignore[union-attr]
            )
        ):
            continue  # kvmlab gives every guest its agent channel
        elif dev.tag in QUIET_DEVICES:
            if QUIET_DEVICES[dev.tag] and QUIET_DEVICES[dev.tag] not in quiet:
                quiet.append(QUIET_DEVICES[dev.tag])
        else:
            out.left_out.append(f"device <{printable(dev.tag)}> {_attrs(dev)}".rstrip())
    out.left_out.extend(quiet)
    if boot_image:
        out.changed = [c for c in out.changed if not c.startswith("disk ")]
        for disk in disks:
            out.left_out.append(
                f"disk {printable(disk['path'])} (booting kvmlab's image; the domain's disks "
                "are not attached, so nothing writes to them)"
            )
        disks = []
        guest["boot"] = "image"
    elif disks and guest.get("boot") != "kernel":
        guest["boot"] = "disk"
    if disks:
        guest["disks"] = disks
    if nics:
        guest["nics"] = nics
    if not boot_image and not disks and guest.get("boot") != "kernel":
        guest["boot"] = "image"
        out.changed.append("no disk to boot: it boots kvmlab's image")


def _attrs(el: ET.Element) -> str:
    shown = " ".join(f"{k}={printable(v)!r}" for k, v in list(el.attrib.items())[:3])
    return f"({shown})" if shown else ""


def _disk(dev: ET.Element, out: Imported, scsi: bool) -> dict[str, Any] | None:
    kind, device = dev.get("type", "file"), dev.get("device", "disk")
    source = dev.find("source")
    path = None
    if source is not None:
        path = source.get("file") if kind == "file" else source.get("dev")
    if device != "disk" or kind not in ("file", "block") or not path:
        what = path or (source.get("name") if source is not None else None) or "no source"
        out.left_out.append(f"{device} ({kind}) {printable(str(what))}")
        return None
    disk: dict[str, Any] = {"path": path}
    driver = dev.find("driver")
    fmt = driver.get("type", "raw") if driver is not None else "raw"
    if fmt in ("qcow2", "raw"):
        disk["format"] = fmt
    else:
        out.left_out.append(f"disk {printable(path)}: format {printable(fmt)} (qcow2 or raw)")
        return None
    target = dev.find("target")
    bus = target.get("bus", "virtio") if target is not None else "virtio"
    if bus == "virtio":
        disk["bus"] = "virtio-blk"
    elif bus == "scsi" and scsi:
        disk["bus"] = "virtio-scsi"
    else:
        disk["bus"] = "virtio-blk"
        out.changed.append(
            f"disk {printable(path)} on bus {printable(bus)} is a virtio-blk disk (kvmlab's "
            "buses: virtio-blk, virtio-scsi): a guest without virtio drivers will not boot it"
        )
    if driver is not None:
        cache = driver.get("cache")
        disk["cache"] = cache if cache in CACHES else "writeback"
        if cache is None:
            out.changed.append(
                f"disk {printable(path)}: QEMU's default cache is cache = 'writeback' "
                "(kvmlab's default is none)"
            )
        if driver.get("io") in AIO and driver.get("io") != "threads":  # threads: QEMU's own
            disk["aio"] = AIO[driver.get("io", "threads")]
    if dev.find("readonly") is not None:
        disk["readonly"] = True
    serial = dev.findtext("serial")
    if serial:
        disk["serial"] = serial
    return disk


def _interface(dev: ET.Element, out: Imported) -> dict[str, Any] | None:
    kind = dev.get("type", "")
    nic: dict[str, Any] = {}
    model = dev.find("model")
    model_type = model.get("type", "virtio") if model is not None else "rtl8139"
    if model_type in ("virtio", "e1000e"):
        nic["model"] = model_type
    else:
        nic["model"] = "e1000e" if model_type.startswith("e1000") else "virtio"
        out.changed.append(
            f"NIC model {printable(model_type)} is {nic['model']} (kvmlab's models: virtio, e1000e)"
        )
    mac = dev.find("mac")
    if mac is not None and mac.get("address"):
        nic["mac"] = mac.get("address", "").lower()
    driver = dev.find("driver")
    if driver is not None:
        if driver.get("queues") and int(driver.get("queues", "1")) > 1:
            nic["queues"] = int(driver.get("queues", "1"))
        for key in ("rx_queue_size", "tx_queue_size"):
            if driver.get(key):
                nic[key] = int(driver.get(key, "256"))
    source = dev.find("source")
    if kind == "user":
        nic["type"] = "user"
    elif kind == "vhostuser" and source is not None:
        nic["type"] = "vhost-user"
        nic["socket"] = source.get("path", "")
        nic["mode"] = source.get("mode", "client")
        reconnect = dev.find("source/reconnect")
        if reconnect is not None and reconnect.get("enabled") == "yes":
            nic["reconnect"] = int(reconnect.get("timeout", "1"))
    elif kind in ("network", "bridge"):
        net = (source.get(kind) if source is not None else None) or "default"
        lab_net = lab_name_from(net)
        nic["type"] = "tap"
        nic["network"] = lab_net
        out.networks.setdefault(lab_net, {})
        out.changed.append(
            f"libvirt {kind} {printable(net)!r} is the lab's private network {lab_net!r} "
            "(a bridge in the lab's own namespace: guests on it reach each other, not the "
            "outside; add a user NIC for that)"
        )
    elif kind == "ethernet":
        nic["type"] = "tap"
        target = dev.find("target")
        if target is not None and target.get("dev"):
            nic["ifname"] = target.get("dev")
    else:
        out.left_out.append(f"interface type {printable(kind)} {_attrs(dev)}".rstrip())
        return None
    return nic


def _other_elements(root: ET.Element, out: Imported) -> None:
    known = {
        "name",
        "uuid",
        "title",
        "description",
        "metadata",
        "memory",
        "currentMemory",
        "memoryBacking",
        "vcpu",
        "os",
        "features",
        "cpu",
        "clock",
        "devices",
        "cputune",
        "on_poweroff",
        "on_reboot",
        "on_crash",
        "pm",
        "numatune",
        "resource",
        "seclabel",
        "vcpus",
        "iothreads",
        "sysinfo",
        "idmap",
        "keywrap",
        "launchSecurity",
    }
    for child in root:
        if child.tag not in known:
            out.left_out.append(f"<{printable(child.tag)}>")
    if root.find("numatune") is not None:
        out.left_out.append("numatune (host NUMA placement: kvmlab pins, it does not bind)")
    if root.find("iothreads") is not None:
        out.changed.append("iothreads are a disk's iothread = true in kvmlab")


def from_domain_xml(text: str, source: str, boot_image: bool = False) -> Imported:
    """A libvirt domain's XML as a lab with one guest; every refusal names
    ``source``."""
    return naming_source(source, lambda: _from_domain_xml(text, source, boot_image))
