"""The parts of a guest, each rendering itself for QEMU and for libvirt."""

from __future__ import annotations

from kvmlab.render.devices.base import Part
from kvmlab.render.devices.boot import BootPart
from kvmlab.render.devices.clock import ClockPart
from kvmlab.render.devices.control import ControlPart
from kvmlab.render.devices.disk import DiskSet
from kvmlab.render.devices.memory import RamLayout
from kvmlab.render.devices.nic import NicPart, needs_slots
from kvmlab.render.devices.processor import Processor
from kvmlab.render.target import Accel, Target
from kvmlab.spec import Guest


def guest_parts(guest: Guest, target: Target, accel: Accel) -> list[Part]:
    """Every part of ``guest`` in the order both renderers emit them."""
    image = target.image if guest.boot == "image" else None
    virtiofs = image is not None and image.share == "virtiofs"
    parts: list[Part] = [
        BootPart(guest, target),
        Processor(guest, accel, target.virt_flag),
        RamLayout(guest, virtiofs=virtiofs),
        ClockPart(guest, accel),
        DiskSet(guest, target),
    ]
    slotted = needs_slots(guest, target)
    parts.extend(
        NicPart(nic, i, target, accel, guest.machine, slotted) for i, nic in enumerate(guest.nics)
    )
    parts.append(ControlPart(target, tuple(guest.guests) if guest.nested else ()))
    return parts


__all__ = ["Part", "guest_parts"]
