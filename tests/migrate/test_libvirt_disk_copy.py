"""The pure parts of a libvirt guest's disks copied by its migration: which disks are
copied (and which are refused before anything starts), the destination XML naming the
copies, and where the destination's NBD server listens."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

libvirt = pytest.importorskip("libvirt")

from kvmlab.errors import UsageError  # noqa: E402
from kvmlab.migrate.transports.libvirt import disk_params  # noqa: E402
from kvmlab.migrate.transports.libvirt_disks import (  # noqa: E402
    CopiedDisk,
    copied_disks,
    retarget,
)

LOCAL = "qemu+unix:///system?socket=/run/kvmlab/.libvirtd/a/sock/libvirt-sock"
FAR = "qemu+tcp://10.253.7.2:16509/system"


def domain(*disks: str) -> ET.Element:
    return ET.fromstring(f"<domain><devices>{''.join(disks)}</devices></domain>")


def disk(dev: str, fmt: str = "qcow2", extra: str = "", **attrs: str) -> str:
    kind = {"type": "file", "device": "disk", **attrs}
    attr = " ".join(f"{k}='{v}'" for k, v in kind.items())
    return (
        f"<disk {attr}><driver name='qemu' type='{fmt}'/>"
        f"<source file='/labs/{dev}.{fmt}'/><target dev='{dev}' bus='virtio'/>{extra}</disk>"
    )


class FakeDomain:
    """``blockInfo`` as libvirt answers it: (capacity, allocation, physical)."""

    def blockInfo(self, dev: str, flags: int) -> list[int]:  # noqa: N802 (libvirt's name)
        return [{"vda": 16 << 20, "vdb": 1 << 30}[dev], 0, 0]


def test_every_writable_file_disk_is_copied_with_its_format_and_size() -> None:
    live = domain(disk("vda"), disk("vdb", "raw"))
    got = copied_disks(FakeDomain(), live, "lab/vm", LOCAL)
    assert got == [
        CopiedDisk("vda", "qcow2", "/labs/vda.qcow2", 16 << 20),
        CopiedDisk("vdb", "raw", "/labs/vdb.raw", 1 << 30),
    ]


@pytest.mark.parametrize(
    ("xml", "why"),
    [
        (disk("vda", device="cdrom"), "is a cdrom"),
        (disk("vda", extra="<readonly/>"), "read-only or shared"),
        (disk("vda", extra="<shareable/>"), "read-only or shared"),
        (disk("vda", type="block"), "of type block"),
        (disk("vda", "vmdk"), "has format vmdk"),
        (disk("hdz9"), "target name 'hdz9'"),
    ],
)
def test_a_disk_that_cannot_be_copied_is_refused_before_anything(xml: str, why: str) -> None:
    with pytest.raises(UsageError) as got:
        copied_disks(FakeDomain(), domain(xml), "lab/vm", LOCAL)
    assert why in str(got.value) and str(got.value).startswith("lab/vm's disk ")


def test_the_destination_xml_names_the_copies_and_nothing_else_changes() -> None:
    xml = ET.tostring(domain(disk("vda"), disk("vdb", "raw")), encoding="unicode")
    copy = "/var/lib/libvirt/images/kvmlab/0123456789abcdef01234567-vdb.raw"
    out = ET.fromstring(retarget(xml, {"vdb": copy}))
    files = [s.get("file") for s in out.iterfind("devices/disk/source")]
    assert files == ["/labs/vda.qcow2", copy]
    assert retarget(xml, {}) == xml


def test_the_nbd_server_listens_where_the_stream_goes() -> None:
    disks = [CopiedDisk("vda", "raw", "/labs/vda.raw", 1 << 20)]
    here: dict[str, Any] = disk_params(LOCAL, LOCAL.replace("/a/", "/b/"), disks)
    assert here == {
        libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS: ["vda"],
        libvirt.VIR_MIGRATE_PARAM_DISKS_URI: "tcp://127.0.0.1",  # not every address
    }
    there = disk_params(LOCAL, FAR, disks)
    assert there[libvirt.VIR_MIGRATE_PARAM_DISKS_URI] == "tcp://10.253.7.2"
    by_name = disk_params(LOCAL, "qemu+tcp://far.example/system", disks)
    assert libvirt.VIR_MIGRATE_PARAM_DISKS_URI not in by_name  # libvirt's to resolve
