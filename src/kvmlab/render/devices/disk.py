"""Disks: -blockdev nodes with virtio-blk or virtio-scsi frontends, and their I/O threads."""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.argv import QemuArgs, opts
from kvmlab.render.devices.slots import NO_SLOTS, PciSlots
from kvmlab.render.target import Target
from kvmlab.render.xmldom import DomainXml, sub
from kvmlab.spec import Disk, Guest

SEED_IMAGE = "cidata.img"
"""The NoCloud seed the runtime writes into the guest's run directory (label ``cidata``)."""

# libvirt cache mode -> (cache.direct, cache.no-flush, guest write cache), as libvirt maps them.
CACHE_MODES: dict[str, tuple[bool, bool, bool]] = {
    "none": (True, False, True),
    "writeback": (False, False, True),
    "writethrough": (False, False, False),
    "directsync": (True, False, False),
    "unsafe": (False, True, True),
}


def _dev_name(bus: str, index: int) -> str:
    """Guest device name as libvirt's target: vda, vdb... or sda, sdb..."""
    prefix = "vd" if bus == "virtio-blk" else "sd"
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(ord("a") + rem) + letters
    return prefix + letters


def guest_disks(guest: Guest, target: Target) -> list[Disk]:
    """The guest's disks in order, the cloud-init seed (when there is one) last."""
    disks = list(guest.disks)
    if guest.cloud_init is not None:
        seed = str(target.seed_image or target.run_path(SEED_IMAGE))
        disks.append(
            Disk(path=seed, format="raw", readonly=True, cache="writeback", serial="cidata")
        )
    return disks


@dataclass(frozen=True)
class DiskSet:
    """All disks of a guest; I/O threads are numbered from 1 in disk order."""

    guest: Guest
    target: Target
    slots: PciSlots = NO_SLOTS

    def _iothreads(self) -> dict[int, int]:
        """Disk index (or -1 for the SCSI controller) -> I/O thread number."""
        threads: dict[int, int] = {}
        for i, disk in enumerate(self.guest.disks):
            if disk.iothread and disk.bus == "virtio-blk":
                threads[i] = len(threads) + 1
        if any(d.iothread and d.bus == "virtio-scsi" for d in self.guest.disks):
            threads[-1] = len(threads) + 1
        return threads

    def _numbered(self) -> list[tuple[int, Disk, str, int]]:
        """Every disk with its index, guest name and index on its bus (a SCSI disk's LUN);
        the cloud-init seed comes last."""
        counts = {"virtio-blk": 0, "virtio-scsi": 0}
        out = []
        for i, disk in enumerate(guest_disks(self.guest, self.target)):
            out.append((i, disk, _dev_name(disk.bus, counts[disk.bus]), counts[disk.bus]))
            counts[disk.bus] += 1
        return out

    def qemu(self, q: QemuArgs) -> None:
        threads = self._iothreads()
        for n in sorted(threads.values()):
            q.add("-object", f"iothread,id=iothread{n}")
        if any(d.bus == "virtio-scsi" for d in self.guest.disks):
            tid = threads.get(-1)
            q.add(
                "-device",
                opts(
                    q.virtio("scsi"),
                    id="scsi0",
                    iothread=f"iothread{tid}" if tid else None,
                    **self.slots.options("scsi0"),
                ),
            )
        for i, disk, _, unit in self._numbered():
            direct, no_flush, write_cache = CACHE_MODES[disk.cache]
            cache = {"cache.direct": direct, "cache.no-flush": no_flush}
            node = f"disk{i}"
            ro = True if disk.readonly else None
            q.add(
                "-blockdev",
                opts(
                    "driver=file",
                    node_name=f"{node}-file",
                    filename=str(self.target.path(disk.path)),
                    aio=disk.aio,
                    read_only=ro,
                    **cache,
                ),
            )
            q.add(
                "-blockdev",
                opts(
                    f"driver={disk.format}",
                    node_name=node,
                    file=f"{node}-file",
                    read_only=ro,
                    **cache,
                ),
            )
            common = {
                "id": node,
                "drive": node,
                "write_cache": write_cache,
                "serial": disk.serial,
                # the first disk boots, as libvirt makes it when the domain names none
                # (its <boot dev='hd'/> default): SeaBIOS then sets up that disk alone
                "bootindex": 1 if i == 0 else None,
            }
            if disk.bus == "virtio-blk":
                tid = threads.get(i)
                q.add(
                    "-device",
                    opts(
                        q.virtio("blk"),
                        iothread=f"iothread{tid}" if tid else None,
                        **common,
                        **self.slots.options(f"disk{i}"),
                    ),
                )
            else:
                # libvirt's drive address (target 0, the disk's LUN) and VPD device id
                scsi_id = {"channel": 0, "scsi_id": 0, "lun": unit}
                vpd = disk.serial or f"drive-scsi0-0-0-{unit}"
                q.add(
                    "-device", opts("scsi-hd", bus="scsi0.0", **scsi_id, device_id_=vpd, **common)
                )

    def xml(self, d: DomainXml) -> None:
        threads = self._iothreads()
        if threads:
            d.section("iothreads").text = str(len(threads))
        for i, disk, dev, unit in self._numbered():
            el = sub(d.devices, "disk", type="file", device="disk")
            tid = threads.get(i)
            sub(
                el,
                "driver",
                name="qemu",
                type=disk.format,
                cache=disk.cache,
                io=disk.aio,
                iothread=tid,
            )
            sub(el, "source", file=str(self.target.path(disk.path)))
            sub(el, "target", dev=dev, bus="virtio" if disk.bus == "virtio-blk" else "scsi")
            if disk.serial:
                sub(el, "serial", disk.serial)
            if disk.readonly:
                sub(el, "readonly")
            if i == 0:
                sub(el, "boot", order=1)
            if disk.bus == "virtio-blk":
                self.slots.address(el, f"disk{i}")
            else:
                sub(el, "address", type="drive", controller=0, bus=0, target=0, unit=unit)
        if any(disk.bus == "virtio-scsi" for disk in self.guest.disks):
            ctl = sub(d.devices, "controller", type="scsi", index=0, model="virtio-scsi")
            if -1 in threads:
                sub(ctl, "driver", iothread=threads[-1])
            self.slots.address(ctl, "scsi0")
