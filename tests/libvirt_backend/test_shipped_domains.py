"""Every shipped lab's domains, rendered for a real libvirtd (a private one, TCG), are
defined by it, started, and (booting the default image) answer their agent through
libvirt; what libvirt keeps after define (its normalisation is the ground truth) still
holds every element and attribute kvmlab rendered."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from kvmlab.guest.cloudinit import write_seed
from kvmlab.guest.image import build_image, latest_cached_image
from kvmlab.render import render_libvirt
from kvmlab.render.identity import tap_name
from kvmlab.runtime.lab import HostAccel, make_target
from kvmlab.spec import Guest, LoadedLab, TapNic, load_lab
from tests.conftest import LAB_FILES
from tests.libvirt_backend.conftest import Daemon

pytestmark = pytest.mark.functional

EXPANDED = {("machine", "q35"): "pc-q35-", ("machine", "pc"): "pc-i440fx-"}
"""Values libvirt expands at define (an alias to the versioned machine type)."""


def missing(rendered: ET.Element, kept: ET.Element, where: str = "") -> list[str]:
    """What of ``rendered`` libvirt's normalised ``kept`` lacks (elements matched by tag
    and the attributes kvmlab set; libvirt adds addresses, aliases, defaults)."""
    out: list[str] = []
    here = f"{where}/{rendered.tag}"
    for key, value in rendered.attrib.items():
        expanded = EXPANDED.get((key, value))
        if expanded and (kept.get(key) or "").startswith(expanded):
            continue
        if kept.get(key) != value:
            out.append(f"{here}@{key}={value!r} (libvirt kept {kept.get(key)!r})")
    text = (rendered.text or "").strip()
    if text and (kept.text or "").strip() != text:
        out.append(f"{here} text {text!r} (libvirt kept {kept.text!r})")
    used: set[int] = set()
    for child in rendered:
        if not isinstance(child.tag, str):
            continue
        candidates = [(i, k) for i, k in enumerate(kept) if k.tag == child.tag and i not in used]
        best = min(candidates, key=lambda c: len(missing(child, c[1], here)), default=None)
        if best is None:
            out.append(f"{here}/{child.tag} (dropped)")
            continue
        used.add(best[0])
        out.extend(missing(child, best[1], here))
    return out


def test_missing_finds_a_dropped_attribute() -> None:
    a = ET.fromstring('<d><devices><disk type="file"><driver cache="none"/></disk></devices></d>')
    b = ET.fromstring('<d><devices><disk type="file"><driver/></disk></devices></d>')
    assert missing(a, b) == ["/d/devices/disk/driver@cache='none' (libvirt kept None)"]
    assert missing(b, a) == []


@pytest.fixture(scope="module")
def shared_dir() -> Iterator[Path]:
    """A directory libvirt's QEMU user may enter: disks and switch sockets of the test."""
    import pwd

    path = Path(tempfile.mkdtemp(prefix="kvmlab-lv-", dir="/tmp"))
    path.chmod(0o755)
    user = pwd.getpwnam("libvirt-qemu")
    os.chown(path, user.pw_uid, user.pw_gid)
    yield path
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def cloud_disk(shared_dir: Path) -> Path:
    """kvmlab's test cloud image, standalone (its cached base is under /root, closed to
    libvirt's QEMU user): copied per guest that boots it."""
    from kvmlab.guest.diskimage import build_test_disk_image

    if os.geteuid() != 0:
        pytest.skip("building the test disk image needs root")
    overlay = build_test_disk_image(shared_dir / "cloud-overlay.qcow2")
    base = shared_dir / "cloud-base.qcow2"
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", str(overlay), str(base)],
                   check=True, timeout=300)  # fmt: skip
    overlay.unlink()
    return base


def _why_not_started(guest: Guest) -> str | None:
    if guest.boot != "image" and guest.cloud_init is None:
        return "boots its own OS disk without a seed, which the test has not (defined only)"
    if guest.memory.backing == "hugepages":
        return "needs huge pages reserved (defined only)"
    return None


def _startable(guest: Guest, switch_kind: str | None) -> tuple[Guest, list[str]]:
    """The guest without the NICs it cannot start with here, and why each was left out."""
    kept, left = [], []
    for i, nic in enumerate(guest.nics):
        if nic.type == "vhost-net" and not Path("/dev/vhost-net").exists():
            left.append(f"nics[{i}]: vhost-net, and this host has no /dev/vhost-net")
        elif nic.type == "vhost-user":  # a domain on the lab's switch: the PVP test
            left.append(f"nics[{i}]: vhost-user, and this test runs no "
                        f"{switch_kind or 'switch'} (QEMU would wait for it)")  # fmt: skip
        else:
            kept.append(nic)
    return guest.model_copy(update={"nics": kept}), left


def _guests() -> list[tuple[Path, str]]:
    return [(f, name) for f in LAB_FILES for name in load_lab(f).lab.guests]


@pytest.mark.parametrize(("lab_file", "name"), _guests(),
                         ids=[f"{f.stem}-{n}" for f, n in _guests()])  # fmt: skip
def test_domain_defines_and_starts(libvirtd: Daemon, shared_dir: Path, lab_file: Path,
                                   name: str, request: pytest.FixtureRequest) -> None:  # fmt: skip
    import libvirt

    from kvmlab.guest.agent_libvirt import LibvirtAgent
    from kvmlab.runtime.libvirt.conn import capabilities
    from kvmlab.runtime.libvirt.publish import publish, publish_seed, unpublish_unused

    loaded: LoadedLab = load_lab(lab_file)
    guest = loaded.lab.guests[name]
    disks = []
    for i, disk in enumerate(guest.disks):
        file = shared_dir / f"{loaded.lab.name}-{name}-{i}.{disk.format}"
        if i == 0 and guest.boot == "disk" and guest.cloud_init is not None:
            base = request.getfixturevalue("cloud_disk")  # the OS disk: a cloud image
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                            str(base), str(file)], check=True)  # fmt: skip
        elif not file.exists():
            subprocess.run(["qemu-img", "create", "-q", "-f", disk.format, str(file), "64M"],
                           check=True)  # fmt: skip
        disks.append(disk.model_copy(update={"path": str(file)}))
    guest = guest.model_copy(update={"disks": disks})
    image = None
    if guest.boot == "image":
        share = "none" if guest.migratable else "9p"
        image = latest_cached_image(share=share) or build_image(share)
    conn = libvirt.open(libvirtd.uri)
    taps: list[str] = []
    try:
        caps = capabilities(conn)
        host = HostAccel("tcg", "the test's private libvirtd runs guests under TCG")
        target = make_target(loaded, (name,), guest, host, shared_dir / "run", image)
        if target.switch_dir is not None:
            target = replace(target, switch_dir=shared_dir)
        if target.image is not None:
            where = publish(conn, libvirtd.uri, [target.image.kernel, target.image.initrd])
            target = replace(target, image=replace(target.image,
                             kernel=where[target.image.kernel],
                             initrd=where[target.image.initrd]))  # fmt: skip
        if guest.cloud_init is not None:
            seed = shared_dir / f"{loaded.lab.name}-{name}-cidata.img"
            write_seed(seed, guest.cloud_init, hostname=name)
            token = secrets.token_hex(12)
            target = replace(target, seed_image=publish_seed(conn, libvirtd.uri, seed, token))
        target = replace(target, libvirt=caps)
        xml = render_libvirt(guest, target)
        dom = conn.defineXML(xml)
        try:
            kept = ET.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
            assert missing(ET.fromstring(xml), kept) == []
            why = _why_not_started(guest)
            if why is not None:
                pytest.skip(f"{lab_file.stem}/{name} {why}")
            guest, left = _startable(guest, target.switch_kind)
            if left:  # defined whole above; started with the NICs this host can run
                print(f"{lab_file.stem}/{name} started without {'; '.join(left)}")
                dom.undefine()
                dom = conn.defineXML(render_libvirt(guest, target))
            made = [tap_name(loaded.lab.name, (name,), i) for i, nic in enumerate(guest.nics)
                    if isinstance(nic, TapNic) and nic.network is not None]  # fmt: skip
            for nic in guest.nics:  # a tap the lab names is the user's: rendered managed='no'
                if isinstance(nic, TapNic) and nic.ifname and nic.network is None:
                    mq = ["multi_queue"] if nic.queues > 1 else []
                    subprocess.run(["ip", "tuntap", "add", "dev", nic.ifname, "mode", "tap",
                                    *mq], check=True)  # fmt: skip
                    taps.append(nic.ifname)
            dom.create()
            assert all(Path(f"/sys/class/net/{t}").exists() for t in made)  # libvirt's taps
            LibvirtAgent(dom, name).wait_ready(timeout=300)
            assert dom.isActive()
        finally:
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        assert not [t for t in made if Path(f"/sys/class/net/{t}").exists()]
        assert all(Path(f"/sys/class/net/{t}").exists() for t in taps)  # the user's: kept
    finally:
        for tap in taps:
            subprocess.run(["ip", "link", "delete", tap], check=False)
        unpublish_unused(conn)
        assert not [p.name() for p in conn.listAllStoragePools(0)], "kvmlab's pool was left"
        conn.close()
