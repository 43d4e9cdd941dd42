"""Whether a recorded libvirt domain still runs (for ``ps`` and ``down``)."""

from __future__ import annotations

import libvirt

from kvmlab.render.xmldom import KVMLAB_NS
from kvmlab.runtime.libvirt.conn import LibvirtFailure, connected


def domain_active(uri: str, uuid: str, token: str = "") -> bool:
    """True when the daemon at ``uri`` runs the domain ``uuid``; False if it does not or
    cannot be reached (``down`` then only forgets it: there is nothing to stop)."""
    if not uri or not uuid:
        return False
    try:
        with connected(uri) as conn:
            dom = conn.lookupByUUIDString(uuid)
            mark = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, KVMLAB_NS, 0)
            return f'token="{token}"' in mark and bool(dom.isActive())
    except (libvirt.libvirtError, LibvirtFailure):
        return False
