"""Every shipped lab's domains, printed by ``kvmlab render -o libvirt`` for a real
libvirtd (a private one, TCG), are defined by ``virsh define`` from that output, started by
``virsh start``, and (one guest per way of booting) answer their agent through libvirt; what
libvirt keeps after define (its normalisation is the ground truth) still holds every
element and attribute kvmlab rendered."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kvmlab.guest.image import build_image, latest_cached_image
from kvmlab.spec import LoadedLab, TapNic, load_lab
from tests.conftest import LAB_FILES, cli
from tests.libvirt_backend.conftest import Daemon

if TYPE_CHECKING:
    import libvirt

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
    subprocess.run(
        ["qemu-img", "convert", "-O", "qcow2", str(overlay), str(base)], check=True, timeout=300
    )
    overlay.unlink()
    return base


BLOCKERS_HERE = (
    "vhost-user socket",  # the lab's switch: the packet-path tests start one
    "/dev/vhost-net",
    "huge pages",
    "pins to host CPU",
)
"""What this host may lack for a shipped domain, each named by render on stderr."""

NIC_BLOCKERS = ("vhost-user socket", "/dev/vhost-net")

BOOTED_TO_THE_AGENT = {"basic-vm1", "migrate-vm"}
"""Domains booted until their agent answers: the default image over 9p and the
self-contained image (a cloud image with its seed boots through libvirt, to cloud-init's
end, in test_cloud_init_libvirt.py); the agent channel is rendered alike for all. The others
are started and must still run once their vCPUs have run half a second of guest code (libvirt's
CPU time): QEMU and libvirt have accepted every device by then (a device fails at start),
and the guest's firmware or kernel is executing."""

RAN_CPU_NS = 500_000_000
"""The CPU time a started domain must have used (its vCPUs and QEMU's threads, as libvirt
counts it) to count as running: progress, not a fixed wait (see STYLE.md)."""


def ran_a_while(dom: libvirt.virDomain, ceiling_s: float = 120.0) -> float:
    """Wait until libvirt's domain ``dom`` has used :data:`RAN_CPU_NS` of CPU time, while
    it stays active; the CPU seconds it used. A ceiling bounds a domain that never runs."""
    deadline = time.monotonic() + ceiling_s
    while True:
        cpu_ns = dom.info()[4]
        if cpu_ns >= RAN_CPU_NS or not dom.isActive() or time.monotonic() > deadline:
            return float(cpu_ns) / 1e9
        time.sleep(0.1)


def _toml(value: object) -> str:
    """``value`` as TOML (inline tables: enough for a lab the test edits)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    assert isinstance(value, dict), value
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"


def _without_nics(lab_file: Path, guest: str, drop: set[int]) -> None:
    """Rewrite ``lab_file`` without ``guest``'s NICs ``drop``, as a user whose host cannot
    run them would."""
    data = tomllib.loads(lab_file.read_text())
    nics = data["guests"][guest]["nics"]
    data["guests"][guest]["nics"] = [n for i, n in enumerate(nics) if i not in drop]
    lab_file.write_text("\n".join(f"{k} = {_toml(v)}" for k, v in data.items()) + "\n")


def _render(daemon: Daemon, lab_file: Path, name: str, *connect: str) -> tuple[str, list[str]]:
    """``kvmlab render -o libvirt`` as a user types it: stdout, and stderr's lines."""
    proc = cli(
        daemon.env,
        "render",
        str(lab_file),
        "--guest",
        name,
        "-o",
        "libvirt",
        *connect,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr.splitlines()


def _virsh(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["virsh", "-q", "-c", daemon.uri, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _prepare(loaded: LoadedLab, name: str, lab_file: Path, cloud: Path | None) -> list[str]:
    """What a user does before rendering: the lab's disks exist (a cloud image's overlay
    as its OS disk) and the taps the lab names exist; the taps made."""
    guest = loaded.lab.guests[name]
    for i, disk in enumerate(guest.disks):
        file = lab_file.parent / disk.path
        file.parent.mkdir(parents=True, exist_ok=True)
        if i == 0 and guest.boot == "disk" and cloud is not None:  # the OS disk: an overlay
            argv = ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(cloud)]
            argv.append(str(file))
        else:
            argv = ["qemu-img", "create", "-q", "-f", disk.format, str(file), "64M"]
        if not file.exists():
            subprocess.run(argv, check=True)
    taps = []
    for nic in guest.nics:  # a tap the lab names is the user's: rendered managed='no'
        if isinstance(nic, TapNic) and nic.ifname and nic.network is None:
            mq = ["multi_queue"] if nic.queues > 1 else []
            subprocess.run(
                ["ip", "tuntap", "add", "dev", nic.ifname, "mode", "tap", *mq], check=True
            )
            taps.append(nic.ifname)
    return taps


def _guests() -> list[tuple[Path, str]]:
    return [(f, name) for f in LAB_FILES for name in load_lab(f).lab.guests]


@pytest.mark.parametrize(
    ("lab_file", "name"), _guests(), ids=[f"{f.stem}-{n}" for f, n in _guests()]
)
def test_printed_domain_defines_and_starts(
    libvirtd: Daemon, shared_dir: Path, lab_file: Path, name: str, request: pytest.FixtureRequest
) -> None:
    """The user's path: ``kvmlab render -o libvirt`` into a file, then the real
    ``virsh define`` and ``virsh start``. Without ``--connect`` the document is accepted
    and stderr names the image libvirt's QEMU user cannot read; with ``--connect URI
    --publish`` it starts as printed, or stderr names exactly what this host lacks."""
    import libvirt

    from kvmlab.guest.agent_libvirt import LibvirtAgent
    from kvmlab.runtime.libvirt.publish import unpublish_unused

    loaded: LoadedLab = load_lab(lab_file)
    guest = loaded.lab.guests[name]
    if guest.boot == "image":
        latest_cached_image(share="none" if guest.migratable else "9p") or build_image(
            "none" if guest.migratable else "9p"
        )
    work = shared_dir / f"{loaded.lab.name}-{name}"
    work.mkdir(mode=0o755)
    lab_copy = work / lab_file.name
    shutil.copy(lab_file, lab_copy)
    cloud = request.getfixturevalue("cloud_disk") if guest.cloud_init is not None else None
    taps = _prepare(loaded, name, lab_copy, cloud)
    domain = f"{loaded.lab.name}-{name}"
    conn = libvirt.open(libvirtd.uri)
    try:
        xml, said = _render(libvirtd, lab_copy, name)  # no daemon asked
        ET.fromstring(xml)
        (work / "assumed.xml").write_text(xml)
        defined = _virsh(libvirtd, "define", str(work / "assumed.xml"))
        assert defined.returncode == 0, defined.stderr
        assert _virsh(libvirtd, "undefine", domain).returncode == 0
        if guest.boot == "image":
            assert any("cannot read" in line and "--publish" in line for line in said), said

        xml, said = _render(libvirtd, lab_copy, name, "--connect", libvirtd.uri, "--publish")
        blockers = [line for line in said if "will not start as printed" in line]
        print("\n".join(said))
        assert all(any(b in line for b in BLOCKERS_HERE) for line in blockers), blockers
        (work / "domain.xml").write_text(xml)
        defined = _virsh(libvirtd, "define", str(work / "domain.xml"))
        assert defined.returncode == 0, defined.stderr
        kept = ET.fromstring(conn.lookupByName(domain).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        assert missing(ET.fromstring(xml), kept) == []
        nics = {
            int(m.group(1))
            for line in blockers
            if any(b in line for b in NIC_BLOCKERS) and (m := re.search(r"nics\[(\d+)\]", line))
        }
        if nics and len(nics) == len(blockers):  # what a user whose host lacks them does
            assert _virsh(libvirtd, "undefine", domain).returncode == 0
            print(f"{domain}: started without nics {sorted(nics)}, which this host cannot run")
            _without_nics(lab_copy, name, nics)
            xml, said = _render(libvirtd, lab_copy, name, "--connect", libvirtd.uri, "--publish")
            blockers = [line for line in said if "will not start as printed" in line]
            assert not blockers, blockers
            (work / "domain.xml").write_text(xml)
            assert _virsh(libvirtd, "define", str(work / "domain.xml")).returncode == 0
        if blockers:
            pytest.skip(f"{domain} defined only: {'; '.join(blockers)}")
        started = _virsh(libvirtd, "start", domain)
        assert started.returncode == 0, started.stderr
        dom = conn.lookupByName(domain)
        if domain in BOOTED_TO_THE_AGENT:
            LibvirtAgent(dom, name).wait_ready(timeout=300)
        else:
            assert ran_a_while(dom) >= RAN_CPU_NS / 1e9, "it ran for the ceiling without CPU"
        assert dom.isActive()
    finally:
        with contextlib.suppress(libvirt.libvirtError):
            dom = conn.lookupByName(domain)
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        for tap in taps:
            subprocess.run(["ip", "link", "delete", tap], check=False)
        unpublish_unused(conn)
        assert not [p.name() for p in conn.listAllStoragePools(0)], "kvmlab's pool was left"
        conn.close()
