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
import fcntl
import os
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import libvirt

from kvmlab.proc.confined import checked_run_root
from kvmlab.render.libvirt_caps import IMAGE_POOL_DIR
from kvmlab.render.xmldom import sub
from kvmlab.runtime.libvirt.conn import LibvirtFailure, describe

POOL = "kvmlab"
POOL_UUID = "6b766d6c-6162-5f70-6f6f-6c0000000001"
"""kvmlab's pool has this UUID: a pool named ``kvmlab`` without it is not kvmlab's and is
never used, emptied or deleted."""
VOLUME = re.compile(
    r"^[0-9a-f]{24}-(kernel|initrd\.img|cidata\.img|(vd|sd)[a-z]{1,2}\.(qcow2|raw))$"
)
"""The names of the volumes kvmlab makes (and so may delete): the image's kernel and
initrd by the image's digest; by the domain's token, its cloud-init seed and the copies of
its disks a migration made on this daemon."""
CHUNK = 1 << 20


LOCK = ".libvirt-publish.lock"
"""In kvmlab's run root: held from an upload until the domain using it exists, and while
unused uploads are deleted, so one kvmlab's clean-up never deletes another's fresh upload."""
_lock = threading.Lock()
_held: list[int] = []  # the lock file's descriptor while this process holds it
_depth = [0]


def hold() -> None:
    """Take the publish lock (re-entrant within this process; waits for other kvmlabs)."""
    with _lock:
        if _depth[0] == 0:
            fd = os.open(checked_run_root() / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            _held.append(fd)
        _depth[0] += 1


def release() -> None:
    """Give the publish lock back (the last release of this process unlocks it)."""
    with _lock:
        if _depth[0] == 0:
            return
        _depth[0] -= 1
        if _depth[0] == 0:
            os.close(_held.pop())


@contextlib.contextmanager
def publishing() -> Iterator[None]:
    """The publish lock for a ``with`` block."""
    hold()
    try:
        yield
    finally:
        release()


def volume_name(file: Path) -> str:
    """``<image digest>-<file name>``: one volume per content, shared between labs."""
    return f"{file.parent.name}-{file.name}"


def _pool_xml() -> str:
    pool = ET.Element("pool", type="dir")
    sub(pool, "name", POOL)
    sub(pool, "uuid", POOL_UUID)
    target = sub(pool, "target")
    sub(target, "path", IMAGE_POOL_DIR)
    return ET.tostring(pool, encoding="unicode")


def _ours(conn: libvirt.virConnect) -> Any | None:
    """kvmlab's pool (by name and UUID), or None; a foreign pool of that name is refused."""
    try:
        found = conn.storagePoolLookupByName(POOL)
    except libvirt.libvirtError:
        return None
    if found.UUIDString() != POOL_UUID:
        return False
    return found


def pool(conn: libvirt.virConnect, uri: str) -> Any:
    """kvmlab's pool on this daemon, defined with its directory built when missing."""
    found = _ours(conn)
    if found is False:
        raise LibvirtFailure(
            f"a storage pool named {POOL} exists and is not kvmlab's (its "
            f"UUID is not {POOL_UUID}); kvmlab leaves it alone",
            uri,
            fix=[f"rename that pool (virsh -c {uri} pool-dumpxml {POOL})"],
        )
    try:
        if found is not None:
            if not found.isActive():
                found.create(0)
            found.refresh(0)
            return found
        # Persistent while in use (a transient pool cannot delete its directory: libvirt
        # deletes only inactive pools, and an inactive transient pool is gone).
        made = conn.storagePoolDefineXML(_pool_xml(), 0)
    except libvirt.libvirtError as exc:
        raise LibvirtFailure(
            f"cannot use the storage pool {POOL} at {IMAGE_POOL_DIR} ({describe(exc)})", uri
        ) from None
    try:
        made.build(0)
        made.create(0)
    except libvirt.libvirtError as exc:
        with contextlib.suppress(libvirt.libvirtError):
            made.undefine()
        raise LibvirtFailure(
            f"cannot create the storage pool {POOL} at {IMAGE_POOL_DIR} ({describe(exc)})", uri
        ) from None
    return made


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


def publish_seed(conn: libvirt.virConnect, uri: str, file: Path, token: str) -> Path:
    """Upload a domain's cloud-init seed as ``<token>-cidata.img`` (its own volume, mode
    0600: libvirt gives it to the domain's QEMU user at start); its path on the host."""
    name = f"{token}-cidata.img"
    if not VOLUME.match(name):
        raise ValueError(f"bad domain token {token!r}")
    where = pool(conn, uri)
    return Path(_upload(conn, uri, where, name, file, file.stat().st_size, mode="0600"))


def _upload(
    conn: libvirt.virConnect,
    uri: str,
    where: Any,
    name: str,
    file: Path,
    size: int,
    mode: str = "0644",
) -> str:
    volume = ET.Element("volume")
    sub(volume, "name", name)
    sub(volume, "capacity", str(size), unit="bytes")
    target = sub(volume, "target")
    sub(target, "format", type="raw")
    # readable by any QEMU: one volume serves labs whose QEMU runs as libvirt's user and
    # labs whose QEMU runs as root without capabilities (libvirt chowns it for the former)
    sub(sub(target, "permissions"), "mode", mode)
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
    except BaseException as exc:  # Ctrl-C too: a half-written volume is never left
        with contextlib.suppress(libvirt.libvirtError):
            stream.abort()
        with contextlib.suppress(libvirt.libvirtError):
            vol.delete(0)
        if not isinstance(exc, libvirt.libvirtError | OSError):
            raise
        what = describe(exc) if isinstance(exc, libvirt.libvirtError) else str(exc)
        raise LibvirtFailure(f"uploading {file} failed ({what})", uri) from None
    return str(vol.path())


def in_use(conn: libvirt.virConnect) -> set[str] | None:
    """Every file path any domain of this daemon names (running or only defined); None
    when a domain could not be read (then nothing counts as unused)."""
    paths: set[str] = set()
    for dom in conn.listAllDomains(0):
        try:
            root = ET.fromstring(dom.XMLDesc(0))
        except (libvirt.libvirtError, ET.ParseError):
            return None
        for tag in ("os/kernel", "os/initrd"):
            paths.update(el.text for el in root.findall(tag) if el.text)
        paths.update(
            str(el.get("file")) for el in root.findall("devices/disk/source") if el.get("file")
        )
        paths.update(
            str(el.get("volume"))
            for el in root.findall("devices/disk/source")
            if el.get("pool") == POOL and el.get("volume")
        )
    return paths


def unpublish_unused(conn: libvirt.virConnect) -> list[str]:
    """Delete kvmlab's volumes no domain uses, and the pool when it is empty; their names
    (under the publish lock: an upload whose domain is being made is not unused)."""
    with publishing():
        return _unpublish_unused(conn)


def _unpublish_unused(conn: libvirt.virConnect) -> list[str]:
    where = _ours(conn)
    if not where:
        return []  # none, or a pool of that name that is not kvmlab's: never touched
    used = in_use(conn)
    if used is None:
        return []
    gone: list[str] = []
    if where.isActive():
        where.refresh(0)
        for vol in where.listAllVolumes(0):
            if VOLUME.match(vol.name()) and not {vol.path(), vol.name()} & used:
                vol.delete(0)
                gone.append(vol.name())
        if where.numOfVolumes() > 0:
            return gone  # still used
        where.destroy()
    where.delete(0)  # the directory kvmlab built (empty)
    where.undefine()
    return gone
