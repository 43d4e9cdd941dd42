"""The default image published where libvirt's QEMU can read it, on any libvirt host.

QEMU run by libvirtd runs as its own user (``libvirt-qemu``), which cannot read root's
image cache; a remote host has no copy at all. kvmlab uploads the kernel and initrd into a
storage pool of its own (``kvmlab``, a directory in libvirt's image tree) through
libvirt's stream API, the same way locally and remotely; volumes are named by the image's
digest, so a second lab reuses them. When no domain uses them any more they are deleted and
the pool with them: nothing of kvmlab's is left in libvirt.
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import libvirt
from kvmlab.render.libvirt_caps import IMAGE_POOL_DIR
from kvmlab.render.xmldom import sub
from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe

POOL = "kvmlab"
VOLUME = re.compile(r"^[0-9a-f]{8,64}-[A-Za-z0-9._-]+$")
"""The names of the volumes kvmlab uploads (and so may delete)."""
CHUNK = 1 << 20


def volume_name(file: Path) -> str:
    """``<image digest>-<file name>``: one volume per content, shared between labs."""
    return f"{file.parent.name}-{file.name}"


def _pool_xml() -> str:
    pool = ET.Element("pool", type="dir")
    sub(pool, "name", POOL)
    target = sub(pool, "target")
    sub(target, "path", IMAGE_POOL_DIR)
    return ET.tostring(pool, encoding="unicode")


def pool(conn: libvirt.virConnect, uri: str) -> Any:
    """kvmlab's pool on this daemon, defined with its directory built when missing."""
    try:
        found = conn.storagePoolLookupByName(POOL)
        if not found.isActive():
            found.create(0)
        found.refresh(0)
        return found
    except libvirt.libvirtError:
        pass
    try:
        # Persistent while in use (a transient pool cannot delete its directory: libvirt
        # deletes only inactive pools, and an inactive transient pool is gone).
        made = conn.storagePoolDefineXML(_pool_xml(), 0)
        made.build(0)
        made.create(0)
        return made
    except libvirt.libvirtError as exc:
        raise LibvirtFailure(f"cannot create the storage pool {POOL} at {IMAGE_POOL_DIR} "
                             f"({describe(exc)})", uri) from None  # fmt: skip


def publish(conn: libvirt.virConnect, uri: str, files: list[Path]) -> dict[Path, Path]:
    """Upload ``files`` (unless already there with the same size); their paths on the host."""
    where = pool(conn, uri)
    out: dict[Path, Path] = {}
    for file in files:
        name, size = volume_name(file), file.stat().st_size
        try:
            vol = where.storageVolLookupByName(name)
            if vol.info()[1] == size:
                out[file] = Path(vol.path())
                continue
            vol.delete(0)
        except libvirt.libvirtError:
            pass
        out[file] = Path(_upload(conn, uri, where, name, file, size))
    return out


def _upload(conn: libvirt.virConnect, uri: str, where: Any, name: str, file: Path,
            size: int) -> str:  # fmt: skip
    volume = ET.Element("volume")
    sub(volume, "name", name)
    sub(volume, "capacity", str(size), unit="bytes")
    sub(sub(volume, "target"), "format", type="raw")
    try:
        vol = where.createXML(ET.tostring(volume, encoding="unicode"), 0)
    except libvirt.libvirtError as exc:
        raise LibvirtFailure(f"cannot create volume {name} ({describe(exc)})", uri) from None
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, 0)
        with file.open("rb") as f:
            while chunk := f.read(CHUNK):
                view = memoryview(chunk)
                while view:
                    sent = stream.send(bytes(view))
                    view = view[sent:]
        stream.finish()
    except (libvirt.libvirtError, OSError) as exc:
        with contextlib.suppress(libvirt.libvirtError):
            stream.abort()
        vol.delete(0)
        what = describe(exc) if isinstance(exc, libvirt.libvirtError) else str(exc)
        raise LibvirtFailure(f"uploading {file} failed ({what})", uri) from None
    return str(vol.path())


def in_use(conn: libvirt.virConnect) -> set[str]:
    """Every file path any domain of this daemon names (running or only defined)."""
    paths: set[str] = set()
    for dom in conn.listAllDomains(0):
        try:
            root = ET.fromstring(dom.XMLDesc(0))
        except (libvirt.libvirtError, ET.ParseError):
            continue
        for tag in ("os/kernel", "os/initrd"):
            paths.update(el.text for el in root.findall(tag) if el.text)
        paths.update(str(el.get("file")) for el in root.findall("devices/disk/source")
                     if el.get("file"))  # fmt: skip
    return paths


def unpublish_unused(conn: libvirt.virConnect) -> list[str]:
    """Delete kvmlab's volumes no domain uses, and the pool when it is empty; their names."""
    try:
        where = conn.storagePoolLookupByName(POOL)
    except libvirt.libvirtError:
        return []
    used = in_use(conn)
    gone: list[str] = []
    if where.isActive():
        where.refresh(0)
        for vol in where.listAllVolumes(0):
            if VOLUME.match(vol.name()) and vol.path() not in used:
                vol.delete(0)
                gone.append(vol.name())
        if where.numOfVolumes() > 0:
            return gone  # still used
        where.destroy()
    where.delete(0)  # the directory kvmlab built (empty)
    where.undefine()
    return gone
