"""The disks of a libvirt guest, copied to the destination during its migration.

Storage is not shared between hosts, so libvirt copies each disk while the guest runs
(``VIR_MIGRATE_NON_SHARED_DISK``: an NBD server in the destination's QEMU, a block mirror
from the source's, kept in step with the guest's writes until the switch-over). kvmlab makes
the copies itself, in its own storage pool on the destination (``<domain token>-<dev>.<fmt>``,
the format and size of the disk), so it knows what it made: a job that does not complete
deletes them, and they go with the domain's other volumes at ``down``. On one host the
copy is a file of its own too: two QEMUs never open one image.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

import libvirt

from kvmlab.errors import UsageError
from kvmlab.render.xmldom import sub
from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe
from kvmlab.runtime.libvirt.publish import VOLUME, in_use, pool


@dataclass(frozen=True)
class CopiedDisk:
    """One disk of the domain the migration copies."""

    dev: str
    """libvirt's target (``vda``)."""
    fmt: str
    """The image format (``qcow2`` or ``raw``): the copy's too."""
    source: str
    """The image on the source's host."""
    size: int
    """Its virtual size in bytes (what the guest sees)."""


def copied_disks(dom: Any, live: ET.Element, address: str, uri: str) -> list[CopiedDisk]:
    """Every disk of the running domain, as the migration will copy it; a disk it cannot
    copy (a CD-ROM, a read-only or shared disk, one that is not a plain file) is refused
    before anything starts."""
    found = []
    for disk in live.iterfind("devices/disk"):
        target, source, driver = disk.find("target"), disk.find("source"), disk.find("driver")
        dev = target.get("dev", "") if target is not None else ""
        file = source.get("file", "") if source is not None else ""
        fmt = driver.get("type", "raw") if driver is not None else "raw"
        why = None
        if disk.get("device", "disk") != "disk":
            why = f"is a {disk.get('device')}"
        elif disk.get("type") != "file" or not file:
            why = f"is of type {disk.get('type')}, not a file"
        elif disk.find("readonly") is not None or disk.find("shareable") is not None:
            why = "is read-only or shared (a cloud-init seed is one)"
        elif fmt not in ("qcow2", "raw"):
            why = f"has format {fmt}"
        elif not VOLUME.match(f"{'0' * 24}-{dev}.{fmt}"):
            why = f"has the target name {dev!r}"
        if why:
            raise UsageError(
                f"{address}'s disk {dev or '?'} ({file or 'no file'}) {why}: kvmlab copies "
                "writable qcow2 or raw image files to the destination, nothing else"
            )
        try:
            size = int(dom.blockInfo(dev, 0)[0])
        except libvirt.libvirtError as exc:
            raise LibvirtFailure(
                f"cannot read the size of disk {dev} ({describe(exc)})", uri, address
            ) from None
        found.append(CopiedDisk(dev, fmt, file, size))
    return found


def make_copies(conn: Any, uri: str, token: str, disks: list[CopiedDisk]) -> dict[str, str]:
    """An empty image per disk in kvmlab's pool on the destination daemon, of the disk's
    format and size; their paths there by target. One left by an earlier attempt that no
    domain uses is replaced; one a domain uses is refused. Call under the publish lock."""
    if not disks:
        return {}
    where = pool(conn, uri)
    used = in_use(conn)
    made: dict[str, str] = {}
    try:
        for disk in disks:
            name = f"{token}-{disk.dev}.{disk.fmt}"
            with contextlib.suppress(libvirt.libvirtError):
                old = where.storageVolLookupByName(name)
                if used is None or {old.path(), name} & used:
                    raise LibvirtFailure(
                        f"the copy {name} of disk {disk.dev} exists on {uri} and a domain "
                        "uses it (or a domain there cannot be read): the guest seems to run "
                        "there already",
                        uri,
                    )
                old.delete(0)
            volume = ET.Element("volume")
            sub(volume, "name", name)
            sub(volume, "capacity", str(disk.size), unit="bytes")
            target = sub(volume, "target")
            sub(target, "format", type=disk.fmt)
            sub(sub(target, "permissions"), "mode", "0600")
            try:
                vol = where.createXML(ET.tostring(volume, encoding="unicode"), 0)
            except libvirt.libvirtError as exc:
                raise LibvirtFailure(
                    f"cannot make the copy {name} of disk {disk.dev} ({describe(exc)})", uri
                ) from None
            made[disk.dev] = str(vol.path())
    except BaseException:
        remove_copies(conn, list(made.values()))
        raise
    return made


def remove_copies(conn: Any, paths: list[str], strict: bool = False) -> None:
    """Delete the copies kvmlab made (by path, each checked to be a copy's name); one that
    is gone already is no error. ``strict``: a daemon that does not answer raises."""
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        if not VOLUME.match(name):
            continue
        try:
            conn.storageVolLookupByPath(path).delete(0)
        except libvirt.libvirtError as exc:
            if strict and exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_VOL:
                raise


def retarget(xml: str, paths: dict[str, str]) -> str:
    """The domain XML with each copied disk's image at its copy's path."""
    if not paths:
        return xml
    root = ET.fromstring(xml)
    for disk in root.iterfind("devices/disk"):
        target, source = disk.find("target"), disk.find("source")
        if target is not None and source is not None and target.get("dev") in paths:
            source.set("file", paths[str(target.get("dev"))])
    return ET.tostring(root, encoding="unicode")
