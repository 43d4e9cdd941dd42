"""The parts of a guest, each rendering itself for QEMU and for libvirt."""

from __future__ import annotations

from kvmlab.render.devices.base import Part
from kvmlab.render.devices.boot import BootPart
from kvmlab.render.devices.clock import ClockPart
from kvmlab.render.devices.control import ControlPart
from kvmlab.render.devices.disk import DiskSet, guest_disks
from kvmlab.render.devices.memory import RamLayout
from kvmlab.render.devices.nic import NicPart
from kvmlab.render.devices.processor import Processor
from kvmlab.render.devices.slots import plan_slots
from kvmlab.render.target import Accel, Target
from kvmlab.spec import Guest


def guest_parts(guest: Guest, target: Target, accel: Accel) -> list[Part]:
    """Every part of ``guest`` in the order both renderers emit them."""
    image = target.image if guest.boot == "image" else None
    virtiofs = image is not None and image.share == "virtiofs"
    disks = guest_disks(guest, target)
    slots = plan_slots(
        guest.machine,
        share=image is not None and image.share != "none",
        scsi=any(d.bus == "virtio-scsi" for d in disks),
        blk_disks=[i for i, d in enumerate(disks) if d.bus == "virtio-blk"],
        nics=len(guest.nics),
    )
    parts: list[Part] = [
        slots,
        BootPart(guest, target, slots),
        Processor(guest, accel, target.virt_flag),
        RamLayout(guest, virtiofs=virtiofs),
        ClockPart(guest, accel),
        DiskSet(guest, target, slots),
    ]
    parts.extend(NicPart(nic, i, target, accel, slots) for i, nic in enumerate(guest.nics))
    parts.append(ControlPart(target, tuple(guest.guests) if guest.nested else (), slots))
    return parts


__all__ = ["Part", "guest_parts"]
