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


def redefine(uri: str, name: str, read: str, fixed: str) -> None:
    """Domain ``name``'s persistent definition on ``uri`` replaced by ``fixed``: only while
    it is still ``read`` (what the change was made from) and ``fixed`` is the same domain
    (name and UUID). The running VM is not touched: the change takes effect at its next
    start."""
    import xml.etree.ElementTree as ET

    shown = printable(name)
    with connected(uri) as conn:
        try:
            dom = conn.lookupByName(name)
            if not dom.isPersistent():
                raise UsageError(
                    f"domain {shown} is transient (no persistent definition to change); "
                    "make the change where it is created"
                )
            now = str(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
            uuid = str(dom.UUIDString())
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(f"reading domain {shown!r}: {describe(exc)}", uri) from None
        if now != read:
            raise UsageError(
                f"domain {shown}'s definition changed while kvmlab diagnosed it; nothing "
                "was changed: run kvmlab diagnose again"
            )
        root = ET.fromstring(fixed)
        if root.findtext("name") != name or root.findtext("uuid") != uuid:
            raise UsageError(f"the fixed XML is not domain {shown}'s (name or UUID); not defined")
        try:
            conn.defineXML(fixed)
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(
                f"defining domain {shown!r} with the fix: {describe(exc)}", uri
            ) from None
