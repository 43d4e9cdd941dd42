"""kvmlab's mark on a libvirt domain, and whether a recorded domain still runs (for ``ps``
and ``down``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import libvirt

from kvmlab.render.xmldom import KVMLAB_NS
from kvmlab.runtime.libvirt.conn import LibvirtFailure, connected


def guest_mark(dom: Any) -> dict[str, str]:
    """The attributes of kvmlab's ``<kvmlab:guest lab= address= token=/>`` in a domain's
    metadata; empty when it has none (not kvmlab's) or it cannot be read."""
    try:
        return dict(
            ET.fromstring(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, KVMLAB_NS, 0)).attrib
        )
    except (libvirt.libvirtError, ET.ParseError):
        return {}


def domain_active(uri: str, uuid: str, token: str = "") -> bool:
    """True when the daemon at ``uri`` runs the domain ``uuid``; False if it does not or
    cannot be reached (``down`` then only forgets it: there is nothing to stop)."""
    if not uri or not uuid:
        return False
    try:
        with connected(uri) as conn:
            dom = conn.lookupByUUIDString(uuid)
            return guest_mark(dom).get("token") == token and bool(dom.isActive())
    except (libvirt.libvirtError, LibvirtFailure):
        return False
