"""A QEMU command line (as ``ps`` or a script shows it, or libvirt's ``domxml-to-native``)
as a lab with one guest: option by option, plain and JSON option values alike."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from kvmlab.errors import UsageError, printable
from kvmlab.spec.importing.common import (
    AIO,
    CACHES,
    HYPERV,
    MAX_INPUT,
    TICKPOLICIES,
    Imported,
    lab_name_from,
    naming_source,
    size_text,
)


def _argv_words(text: str, source: str) -> list[str]:
    if len(text) > MAX_INPUT:
        raise UsageError(f"{source}: over {MAX_INPUT // 1048576} MiB: not a command line")
    joined = text.replace("\\\n", " ")
    try:
        words = shlex.split(joined, comments=False)
    except ValueError as exc:
        raise UsageError(
            f"{source}: not a command line ({exc}); quote it as a shell would"
        ) from None
    env = 0
    while env < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[env]):
        env += 1
    words = words[env:]
    if not words or "qemu-system" not in words[0].rsplit("/", 1)[-1]:
        raise UsageError(
            f"{source}: does not start with a QEMU binary (qemu-system-x86_64 ...); give "
            "the command line as ps -o args or the script shows it"
        )
    return words


def _flat(data: dict[str, Any], prefix: str = "") -> list[tuple[str, object]]:
    """A JSON object's scalars by dotted key (``cache.direct``), as QEMU's dotted keys."""
    out: list[tuple[str, object]] = []
    for k, v in data.items():
        if isinstance(v, dict) and not prefix.count("."):
            out += _flat(v, f"{prefix}{k}.")
        elif isinstance(v, (str, int, float, bool)):
            out.append((f"{prefix}{k}", v))
    return out


def _json_opts(value: str) -> tuple[str, dict[str, str]]:
    """A JSON option value (libvirt's ``-device '{"driver":...}'``) as (first, keys)."""
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        raise UsageError(f"option value {printable(value[:60])!r} is not JSON") from None
    if not isinstance(data, dict):
        raise UsageError(f"option value {printable(value[:60])!r} is not a JSON object")
    keys: dict[str, str] = {}
    for k, v in _flat(data):
        keys[k] = "on" if v is True else "off" if v is False else str(v)
    first = next((keys.pop(k) for k in ("driver", "qom-type", "type") if k in keys), "")
    return first, keys


def _opts(value: str) -> tuple[str, dict[str, str]]:
    """QEMU's ``first,key=value,flag`` option syntax (``,,`` a literal comma), or a JSON
    object: the first bare word (or the JSON's driver/qom-type/type, or '') and the keys;
    a bare flag later is ``flag=on``."""
    if value.lstrip().startswith("{"):
        return _json_opts(value)
    parts, current, i = [], "", 0
    while i < len(value):
        if value[i] == "," and value[i + 1 : i + 2] == ",":
            current += ","
            i += 2
            continue
        if value[i] == ",":
            parts.append(current)
            current = ""
        else:
            current += value[i]
        i += 1
    parts.append(current)
    first = "" if "=" in parts[0] else parts[0]
    keys: dict[str, str] = {}
    for part in parts[(1 if first else 0) :]:
        key, eq, val = part.partition("=")
        keys[key] = val if eq else "on"
    return first, keys


def _qemu_size(text: str, default_unit: str = "M") -> int:
    match = re.fullmatch(r"(\d+)([kKmMgGtT]?)[bB]?", text.strip())
    if match is None:
        raise UsageError(f"memory size {printable(text)!r} is not QEMU's (512, 2G)")
    unit = (match.group(2) or default_unit).upper()
    return (
        int(match.group(1)) * {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit]
    )


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


QUIET_QEMU_DEVICES = _words(
    "VGA ich9-usb-ehci1 ich9-usb-uhci1 ich9-usb-uhci2 ich9-usb-uhci3 isa-serial "
    "pcie-root-port piix3-usb-uhci qemu-xhci usb-ehci usb-tablet virtio-balloon-pci "
    "virtio-rng-pci virtio-scsi-pci virtio-serial virtio-serial-pci virtserialport "
)
"""Devices kvmlab adds itself where its guests need them, or that change nothing a
benchmark or a diagnosis reads (controllers, balloon, RNG, USB, display)."""

TAKES_VALUE = _words(
    "D L M accel append audiodev bios blockdev boot chardev cpu d debugcon device "
    "display drive fsdev fw_cfg global icount incoming initrd k kernel loadvm m "
    "machine mem-path mon monitor msg name netdev nic numa object option-rom "
    "overcommit parallel pidfile qmp rtc run-with sandbox serial smbios smp spice "
    "trace usbdevice uuid vga virtfs vnc watchdog-action "
)
"""QEMU options that take a value (the others are flags)."""


def _from_qemu_argv(text: str, source: str, boot_image: bool = False) -> Imported:
    """A QEMU command line (``qemu-system-x86_64 -name ... -m ...``, as ``ps`` or a
    script shows it) as a lab with one guest."""
    words = _argv_words(text, source)
    options: list[tuple[str, str | None]] = []
    i = 1
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            raise UsageError(
                f"{source}: {printable(word)!r} is not an option (a disk image given without "
                "-drive?); write it as -drive file=PATH"
            )
        opt = word.lstrip("-")
        if opt in TAKES_VALUE:
            if i + 1 >= len(words):
                raise UsageError(f"{source}: -{opt} has no value")
            options.append((opt, words[i + 1]))
            i += 2
        else:
            options.append((opt, None))
            i += 1
    named = next((v for o, v in reversed(options) if o == "name" and v is not None), None)
    raw_name = "vm"
    if named is not None:
        first, keys = _opts(named)
        raw_name = keys.get("guest") or first or "vm"
    name = lab_name_from(raw_name)
    guest: dict[str, Any] = {}
    out = Imported(
        {
            "name": name,
            "description": f"Imported from a QEMU command line ({source})",
            "guests": {name: guest},
        },
        source,
    )
    if name != raw_name:
        out.changed.append(f"name {printable(raw_name)!r} is {name!r} (kvmlab's names)")
    _Argv(options, guest, out, boot_image).convert()
    return out


class _Argv:
    """One QEMU command line's options turned into a guest, option by option."""

    def __init__(
        self,
        options: list[tuple[str, str | None]],
        guest: dict[str, Any],
        out: Imported,
        boot_image: bool,
    ) -> None:
        self.options = options
        self.guest = guest
        self.out = out
        self.boot_image = boot_image
        self.objects: dict[str, tuple[str, dict[str, str]]] = {}
        self.netdevs: dict[str, tuple[str, dict[str, str]]] = {}
        self.drives: dict[str, dict[str, str]] = {}
        self.blockdevs: dict[str, dict[str, str]] = {}
        self.chardevs: dict[str, dict[str, str]] = {}
        self.left: list[str] = []

    def _leave(self, what: str) -> None:
        if what not in self.left:
            self.left.append(what)

    def convert(self) -> None:
        g = self.guest
        for opt, value in self.options:  # what devices refer to, first
            if value is None:
                continue
            first, keys = _opts(value)
            if opt == "object":
                self.objects[keys.get("id", "")] = (first or keys.get("qom-type", ""), keys)
            elif opt == "netdev":
                self.netdevs[keys.get("id", "")] = (first, keys)
            elif opt == "drive" and keys.get("if") == "none":
                self.drives[keys.get("id", "")] = keys
            elif opt == "blockdev":
                self.blockdevs[keys.get("node-name", "")] = {"driver": first, **keys}
            elif opt == "chardev":
                self.chardevs[keys.get("id", "")] = {"kind": first, **keys}
        accel = "tcg"
        disks: list[dict[str, Any]] = []
        nics: list[dict[str, Any]] = []
        cells: list[dict[str, Any]] = []
        for opt, value in self.options:
            first, keys = _opts(value) if value is not None else ("", {})
            if opt in ("enable-kvm",) or (opt == "accel" and first == "kvm"):
                accel = "kvm"
            elif opt == "accel":
                accel = first or "tcg"
            elif opt in ("machine", "M"):
                self._machine(first, keys)
                if keys.get("accel"):
                    accel = keys["accel"].split(":")[0]
            elif opt == "m" and value is not None:
                size = keys.get("size") or first
                g.setdefault("memory", {})["size"] = size_text(_qemu_size(size))
            elif opt == "smp" and value is not None:
                self._smp(first, keys)
            elif opt == "cpu":
                self._cpu(first, keys)
            elif opt == "rtc":
                self._rtc(keys)
            elif opt == "global" and value is not None:
                self._global(value)
            elif opt == "no-hpet":
                self._timer("hpet", "present", False)
            elif opt == "numa" and first == "node":
                cells.append(self._numa(keys))
            elif opt == "drive" and keys.get("if") != "none":
                disk = self._drive(keys, keys.get("if", "ide"))
                if disk:
                    disks.append(disk)
            elif opt == "device":
                self._device(first, keys, disks, nics)
            elif opt == "nic":
                nic = self._nic(first, keys.get("model", "virtio-net-pci"), keys)
                if nic:
                    nics.append(nic)
            elif opt in ("kernel", "initrd", "append") and value is not None:
                g[{"kernel": "kernel", "initrd": "initrd", "append": "append"}[opt]] = value
            elif opt in HANDLED_ELSEWHERE:
                continue
            else:
                self._leave(f"-{opt}" + (f" {printable(value)}" if value else ""))
        self._finish(accel, disks, nics, cells)

    def _finish(
        self,
        accel: str,
        disks: list[dict[str, Any]],
        nics: list[dict[str, Any]],
        cells: list[dict[str, Any]],
    ) -> None:
        g, out = self.guest, self.out
        if accel == "kvm":
            out.changed.append(
                "-enable-kvm / accel kvm is accel = 'auto': KVM where this host's KVM "
                "serves a stock kernel, TCG otherwise (kvmlab check says which)"
            )
        elif accel == "tcg":
            g["accel"] = "tcg"
        else:
            out.changed.append(f"accel {printable(accel)} is accel = 'auto'")
        memory = g.setdefault("memory", {"size": "128M"})
        if "size" not in memory:
            memory["size"] = "128M"
            out.changed.append("no -m: QEMU's default 128M")
        if cells:
            memory["numa"] = cells
        g.setdefault("machine", "pc")
        g.setdefault("vcpus", 1)
        if "cpu" not in g:
            g["cpu"] = {"model": "qemu64"}
        if "kernel" in g and not self.boot_image:
            g["boot"] = "kernel"
        if self.boot_image:
            out.changed = [c for c in out.changed if not c.startswith("disk ")]
            for disk in disks:
                self._leave(
                    f"disk {printable(disk['path'])} (booting kvmlab's image; the VM's "
                    "disks are not attached, so nothing writes to them)"
                )
            for key in ("kernel", "initrd", "append"):
                g.pop(key, None)
            disks = []
            g["boot"] = "image"
        elif disks and "kernel" not in g:
            g["boot"] = "disk"
        elif not disks and "kernel" not in g:
            g["boot"] = "image"
            out.changed.append("no disk to boot: it boots kvmlab's image")
        if disks:
            g["disks"] = disks
        if nics:
            g["nics"] = nics
        out.left_out.extend(self.left)

    def _machine(self, first: str, keys: dict[str, str]) -> None:
        kind = first or keys.get("type", "pc")
        self.guest["machine"] = "q35" if "q35" in kind else "microvm" if kind == "microvm" else "pc"
        if kind not in ("q35", "pc", "microvm"):
            self.out.changed.append(f"machine {printable(kind)} is {self.guest['machine']}")
        backend = keys.get("memory-backend")
        if backend:
            self._backing(backend)
        if keys.get("hpet") in ("on", "off"):
            self._timer("hpet", "present", keys["hpet"] == "on")
        for key in keys:
            if key not in (
                "type",
                "accel",
                "memory-backend",
                "hpet",
                "usb",
                "dump-guest-core",
                "vmport",
            ):
                self._leave(f"-machine {printable(key)}")

    def _smp(self, first: str, keys: dict[str, str]) -> None:
        cpus = keys.get("cpus") or first or "1"
        topo = {k: int(keys[k]) for k in ("sockets", "cores", "threads") if keys.get(k)}
        count = int(cpus) if cpus.isdigit() else 1
        if topo:
            product = topo.get("sockets", 1) * topo.get("cores", 1) * topo.get("threads", 1)
            count = count if first or keys.get("cpus") else product
            if product != count:
                self.out.changed.append(
                    f"-smp {count} with a topology of {product} is {product} vCPUs"
                )
                count = product
            self.guest.setdefault("cpu", {}).update(topo)
        if keys.get("maxcpus") and keys["maxcpus"] != str(count):
            self._leave(f"-smp maxcpus={printable(keys['maxcpus'])} (no hot-plug)")
        self.guest["vcpus"] = count

    def _cpu(self, first: str, keys: dict[str, str]) -> None:
        cpu = self.guest.setdefault("cpu", {})
        cpu["model"] = {"host": "host-passthrough"}.get(first, first or "qemu64")
        features, hyperv = [], []
        for key, val in keys.items():
            on = val in ("on", "true", "yes", "")
            if key.startswith(("+", "-")) and key[1:] != "kvmclock":
                features.append(key)
            elif key == "hv-time":
                self._timer("hypervclock", "present", on)
            elif key.lstrip("+-") == "kvmclock" and val in ("on", "off", ""):
                present = key[0] == "+" if key[0] in "+-" else on
                self._timer("kvmclock", "present", present)
            elif key == "hv-spinlocks":
                hyperv.append("spinlocks")
                retries = int(val, 0) if re.fullmatch(r"(0x[0-9a-fA-F]+|\d+)", val) else 8191
                self.guest.setdefault("hyperv", {})["spinlock_retries"] = retries
            elif key.startswith("hv-") and key[3:] in HYPERV:
                if on:
                    hyperv.append(key[3:])
            elif key in ("migratable", "check", "enforce", "kvm"):
                continue
            elif val in ("on", "off"):
                features.append(("+" if val == "on" else "-") + key)
            else:
                self._leave(f"-cpu {printable(key)}={printable(val)}")
        if features:
            cpu["features"] = features
        if hyperv:
            self.guest.setdefault("hyperv", {})["features"] = hyperv

    def _timer(self, name: str, key: str, value: Any) -> None:
        clock = self.guest.setdefault("clock", {})
        clock.setdefault("timers", {}).setdefault(name, {})[key] = value

    def _rtc(self, keys: dict[str, str]) -> None:
        base = keys.get("base", "utc")
        if base in ("utc", "localtime"):
            self.guest.setdefault("clock", {})["offset"] = base
        else:
            self.out.changed.append(f"-rtc base={printable(base)} is utc")
        if keys.get("driftfix") == "slew":
            self._timer("rtc", "tickpolicy", "catchup")

    def _global(self, value: str) -> None:
        prop, _, val = value.partition("=")
        if prop in ("kvm-pit.lost_tick_policy", "pit.lost_tick_policy") and val in TICKPOLICIES:
            self._timer("pit", "tickpolicy", val)
        elif prop.startswith("ICH9-LPC.disable_s") or prop.startswith("PIIX4_PM.disable_s"):
            return
        else:
            self._leave(f"-global {printable(value)}")

    def _backing(self, ident: str, whole: bool = True) -> None:
        """The guest's RAM backing from memory object ``ident`` (``whole``: it is all of
        the guest's RAM, so its size is the guest's)."""
        kind, keys = self.objects.get(ident, ("", {}))
        memory = self.guest.setdefault("memory", {})
        if whole and keys.get("size"):
            memory["size"] = size_text(_qemu_size(keys["size"], "B"))
        hugetlb = keys.get("hugetlb") == "on" or "hugepages" in keys.get("mem-path", "")
        if hugetlb:
            memory["backing"] = "hugepages"
            size = keys.get("hugetlbsize", "2M")
            memory["hugepage_size"] = "1G" if _qemu_size(size, "B") == 1 << 30 else "2M"
        elif kind == "memory-backend-memfd":
            memory["backing"] = "memfd"
        elif kind == "memory-backend-file":
            self.out.changed.append(
                f"memory file {printable(keys.get('mem-path', ''))} is a memfd (backing = 'memfd')"
            )
            memory["backing"] = "memfd"
        if keys.get("share") == "on":
            memory["shared"] = True
        if keys.get("prealloc") == "on":
            memory["prealloc"] = True

    def _numa(self, keys: dict[str, str]) -> dict[str, Any]:
        cell: dict[str, Any] = {"cpus": keys.get("cpus", "0")}
        kind, obj = self.objects.get(keys.get("memdev", ""), ("", {}))
        if obj.get("size"):
            cell["memory"] = size_text(_qemu_size(obj["size"], "B"))
        elif keys.get("mem"):
            cell["memory"] = size_text(_qemu_size(keys["mem"]))
        if obj.get("share") == "on":
            cell["mem_access"] = "shared"
        if kind:
            self._backing(keys.get("memdev", ""), whole=False)
        return cell

    def _drive(self, keys: dict[str, str], bus: str) -> dict[str, Any] | None:
        path = keys.get("file")
        media = keys.get("media", "disk")
        if not path or media == "cdrom":
            self._leave(f"-drive {media} {printable(path or 'without a file')}")
            return None
        disk: dict[str, Any] = {"path": path}
        fmt = keys.get("format", "raw")
        if fmt not in ("qcow2", "raw"):
            self._leave(f"disk {printable(path)}: format {printable(fmt)} (qcow2 or raw)")
            return None
        disk["format"] = fmt
        if bus in ("virtio", "virtio-blk"):
            disk["bus"] = "virtio-blk"
        elif bus == "virtio-scsi":
            disk["bus"] = "virtio-scsi"
        else:
            disk["bus"] = "virtio-blk"
            self.out.changed.append(
                f"disk {printable(path)} on {printable(bus)} is a virtio-blk disk (kvmlab's "
                "buses: virtio-blk, virtio-scsi): a guest without virtio drivers will not boot it"
            )
        cache = keys.get("cache", "writeback")
        disk["cache"] = cache if cache in CACHES else "writeback"
        if keys.get("aio") in AIO and keys["aio"] != "threads":  # threads: QEMU's own
            disk["aio"] = keys["aio"]
        if keys.get("readonly") == "on":
            disk["readonly"] = True
        if keys.get("serial"):
            disk["serial"] = keys["serial"]
        return disk

    def _device(
        self,
        driver: str,
        keys: dict[str, str],
        disks: list[dict[str, Any]],
        nics: list[dict[str, Any]],
    ) -> None:
        if driver in ("virtio-blk-pci", "virtio-blk", "scsi-hd", "ide-hd"):
            drive = self.drives.get(keys.get("drive", "")) or self._blockdev(keys.get("drive", ""))
            if drive is None:
                self._leave(f"-device {driver} without a -drive")
                return
            bus = {"virtio-blk-pci": "virtio", "virtio-blk": "virtio", "scsi-hd": "virtio-scsi"}
            disk = self._drive(drive, bus.get(driver, "ide"))
            if disk and keys.get("serial"):
                disk["serial"] = keys["serial"]
            if disk:
                disks.append(disk)
        elif driver in ("virtio-net-pci", "virtio-net", "e1000e", "e1000", "rtl8139"):
            kind, netdev = self.netdevs.get(keys.get("netdev", ""), ("", {}))
            nic = self._nic(kind, driver, {**netdev, **keys})
            if nic:
                nics.append(nic)
        elif driver in QUIET_QEMU_DEVICES:
            return
        else:
            self._leave(f"-device {printable(driver)}")

    def _blockdev(self, node: str) -> dict[str, str] | None:
        """A ``-blockdev`` chain (format node over a file node) as -drive keys."""
        top = self.blockdevs.get(node)
        if top is None:
            return None
        keys: dict[str, str] = {}
        if top.get("driver") in ("qcow2", "raw"):
            keys["format"] = top["driver"]
            below = self.blockdevs.get(top.get("file", ""), {})
        else:
            keys["format"] = "raw"
            below = top
        if below.get("filename"):
            keys["file"] = below["filename"]
        if below.get("aio"):
            keys["aio"] = below["aio"]
        if below.get("cache.direct") == "on":
            keys["cache"] = "none"
        if top.get("read-only") == "on":
            keys["readonly"] = "on"
        return keys

    def _nic(self, kind: str, model: str, keys: dict[str, str]) -> dict[str, Any] | None:
        nic: dict[str, Any] = {}
        if model.startswith("virtio"):
            nic["model"] = "virtio"
        elif model.startswith("e1000"):
            nic["model"] = "e1000e"
            if model != "e1000e":
                self.out.changed.append(f"NIC model {printable(model)} is e1000e")
        else:
            nic["model"] = "virtio"
            self.out.changed.append(f"NIC model {printable(model)} is virtio")
        if keys.get("mac"):
            nic["mac"] = keys["mac"].lower()
        queues = keys.get("queues")
        if queues and queues.isdigit() and int(queues) > 1:
            nic["queues"] = int(queues)
        for key in ("rx_queue_size", "tx_queue_size"):
            if keys.get(key, "").isdigit():
                nic[key] = int(keys[key])
        if kind == "user":
            nic["type"] = "user"
            forwards = []
            for key, val in keys.items():
                if key.startswith("hostfwd"):
                    match = re.fullmatch(r"(tcp|udp):([\d.]*):(\d+)-[\d.]*:(\d+)", val)
                    if match is None:
                        self._leave(f"hostfwd {printable(val)}")
                        continue
                    fwd: dict[str, Any] = {"host_port": int(match[3]), "guest_port": int(match[4])}
                    if match[1] == "udp":
                        fwd["proto"] = "udp"
                    if match[2]:
                        fwd["host_addr"] = match[2]
                    forwards.append(fwd)
            if forwards:
                nic["forwards"] = forwards
        elif kind == "tap":
            nic["type"] = "vhost-net" if keys.get("vhost") == "on" else "tap"
            if keys.get("ifname"):
                nic["ifname"] = keys["ifname"]
        elif kind == "vhost-user":
            chardev = self.chardevs.get(keys.get("chardev", ""), {})
            if not chardev.get("path"):
                self._leave("a vhost-user netdev without its chardev's socket path")
                return None
            nic["type"] = "vhost-user"
            nic["socket"] = chardev["path"]
            nic["mode"] = "server" if chardev.get("server") in ("on", "") else "client"
        else:
            self._leave(f"a NIC on a {printable(kind or 'missing')} netdev")
            return None
        return nic


HANDLED_ELSEWHERE = _words(
    "name object netdev chardev blockdev uuid nodefaults no-user-config nographic "
    "display vga serial monitor qmp mon pidfile daemonize S no-shutdown boot msg "
    "overcommit sandbox "
)
"""Options read where something refers to them (objects, netdevs, chardevs, blockdevs), or
that change nothing the guest sees (names, monitors, display, daemon and boot order)."""


def from_qemu_argv(text: str, source: str, boot_image: bool = False) -> Imported:
    """A QEMU command line as a lab with one guest; every refusal names
    ``source``."""
    return naming_source(source, lambda: _from_qemu_argv(text, source, boot_image))
