"""Spec -> libvirt domain XML (an element tree; validated by libvirt's schema in tests)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from kvmlab.errors import RenderError
from kvmlab.render.devices import guest_parts
from kvmlab.render.identity import domain_uuid
from kvmlab.render.target import Target
from kvmlab.render.xmldom import DomainXml
from kvmlab.spec import Guest


def render_libvirt(guest: Guest, target: Target) -> str:
    """The domain XML of ``guest``; raises :class:`RenderError` where libvirt cannot say it."""
    if guest.machine == "microvm":
        raise RenderError(target.name, "libvirt has no microvm machine type; use --format qemu")
    accel, why = target.accel_for(guest)
    guest = guest.under(accel)  # its when_tcg overrides, under TCG
    d = DomainXml.new("kvm" if accel == "kvm" else "qemu")
    d.note(why)
    d.section("name").text = target.name
    d.section("uuid").text = domain_uuid(target.lab, target.address)
    for part in guest_parts(guest, target, accel):
        part.xml(d)
    emulator = ET.Element("emulator")
    emulator.text = target.qemu_binary
    d.devices.insert(0, emulator)
    return d.tostring()
