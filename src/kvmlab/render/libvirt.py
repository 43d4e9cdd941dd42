"""Spec -> libvirt domain XML (an element tree; validated by libvirt's schema in tests)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from kvmlab.errors import RenderError
from kvmlab.render.devices import guest_parts
from kvmlab.render.identity import domain_uuid
from kvmlab.render.target import Target
from kvmlab.render.xmldom import KVMLAB_NS, DomainXml, MalformedXml, sub
from kvmlab.spec import Guest


def render_libvirt(guest: Guest, target: Target) -> str:
    """The domain XML of ``guest``; raises :class:`RenderError` where libvirt cannot say it."""
    if guest.machine == "microvm":
        raise RenderError(target.name, "libvirt has no microvm machine type; use -o qemu")
    accel, why = target.accel_for(guest)
    guest = guest.under(accel)  # its when_tcg overrides, under TCG
    caps = target.libvirt
    if caps is not None and caps.known and accel == "kvm" and "kvm" not in caps.domain_types:
        raise RenderError(
            target.name,
            f"runs under KVM, but {caps.label} offers no kvm "
            "domain on its host (no /dev/kvm its QEMU user can open); "
            'set accel = "tcg" or fix /dev/kvm there',
        )
    if caps is not None and guest.boot == "image" and target.image is not None:
        share = target.image.share
        if share == "virtiofs" and "virtiofs" not in caps.fs_drivers:
            raise RenderError(
                target.name,
                f"shares the host root by virtiofs, which "
                f"{caps.label} does not offer; use the 9p image",
            )
    d = DomainXml.new("kvm" if accel == "kvm" else "qemu")
    d.note(why)
    if caps is not None:
        d.note(f"rendered for {caps.label}")
    d.section("name").text = target.name
    d.section("uuid").text = domain_uuid(target.lab, target.address)
    if target.libvirt_token is not None:
        mark = ET.SubElement(d.section("metadata"), f"{{{KVMLAB_NS}}}guest")
        mark.set("lab", target.lab)
        mark.set("address", "/".join(target.address))
        mark.set("token", target.libvirt_token)
    for part in guest_parts(guest, target, accel):
        part.xml(d)
    if target.libvirt_as_root is not None:
        d.note(f"QEMU runs as root: {target.libvirt_as_root}")
        sub(d.section("seclabel", type="static", model="dac", relabel="no"), "label", "+0:+0")
    emulator = ET.Element("emulator")
    emulator.text = target.qemu_binary
    d.devices.insert(0, emulator)
    try:
        return d.tostring()
    except MalformedXml as exc:
        raise RenderError(
            target.name,
            f"its domain XML would not be well-formed ({exc}): a "
            "value of the lab carries a character XML cannot hold",
        ) from None
