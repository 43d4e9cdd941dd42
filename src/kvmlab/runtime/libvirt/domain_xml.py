"""A defined domain's XML, read from a libvirt daemon for ``kvmlab import -c URI NAME``:
read-only (``virDomainGetXMLDesc``, inactive definition), nothing of the domain changed."""

from __future__ import annotations

import libvirt

from kvmlab.errors import UsageError, printable
from kvmlab.runtime.libvirt.conn import LibvirtFailure, connected, describe


def domain_xml(uri: str, name: str) -> str:
    """Domain ``name``'s persistent definition (its live one when it has none) on ``uri``."""
    with connected(uri) as conn:
        try:
            dom = conn.lookupByName(name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                raise UsageError(
                    f"no domain {printable(name)!r} on {printable(uri)}; virsh -c "
                    f"{printable(uri)} list --all shows its domains"
                ) from None
            raise LibvirtFailure(
                f"looking up domain {printable(name)!r}: {describe(exc)}", uri
            ) from None
        try:
            flags = libvirt.VIR_DOMAIN_XML_INACTIVE if dom.isPersistent() else 0
            return str(dom.XMLDesc(flags))
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(
                f"reading domain {printable(name)!r}: {describe(exc)}", uri
            ) from None
