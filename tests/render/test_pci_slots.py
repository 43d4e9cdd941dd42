"""Every PCI device of a guest sits at the same root-bus slot in its QEMU command line and
in its libvirt domain (kvmlab.render.devices.slots): libvirt would otherwise put each device
behind a PCIe root port of its own and add a USB controller, and the guest would see another
PCI tree and, with a NIC through qemu:commandline, another NIC order. The functional test
that boots one guest under both backends and compares what it sees is
tests/libvirt_backend/test_guest_sees_the_same.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from kvmlab.render import render_libvirt, render_qemu
from kvmlab.render.devices.slots import plan_slots
from kvmlab.spec import LoadedLab, load_lab
from tests.conftest import LAB_FILES, target_for

ROLE = {
    "virtio-9p-pci": "share",
    "vhost-user-fs-pci": "share",
    "virtio-scsi-pci": "scsi0",
    "virtio-serial-pci": "vser0",
    "virtio-rng-pci": "rng",
}


def _qemu_slots(argv: list[str]) -> dict[str, int]:
    """Role (or NIC MAC) -> slot, from every addressed -device."""
    out: dict[str, int] = {}
    for arg in argv:
        addr = re.search(r",addr=0x([0-9a-f]+)", arg)
        if addr is None or ("bus=pcie.0" not in arg and "bus=pci.0" not in arg):
            continue
        kind = arg.split(",")[0]
        mac = re.search(r"mac=([0-9a-f:]+)", arg)
        disk = re.search(r"\bid=(disk\d+)", arg)
        role = mac.group(1) if mac else disk.group(1) if disk else ROLE[kind]
        out[role] = int(addr.group(1), 16)
    return out


def _xml_slots(xml: str) -> dict[str, int]:
    """The same from the domain: its devices' addresses, and a qemu:commandline NIC's."""
    devices = ET.fromstring(xml).find("devices")
    assert devices is not None
    out: dict[str, int] = {}

    def slot(el: ET.Element) -> int | None:
        address = el.find("address")
        return None if address is None else int(address.get("slot", ""), 16)

    for i, disk in enumerate(devices.iter("disk")):
        if (s := slot(disk)) is not None:
            out[f"disk{i}"] = s
    for el in devices:
        s = slot(el)
        if s is None:
            continue
        if el.tag == "interface":
            mac = el.find("mac")
            assert mac is not None
            out[mac.get("address", "")] = s
        elif el.tag == "filesystem":
            out["share"] = s
        elif el.tag == "rng":
            out["rng"] = s
        elif el.tag == "controller":
            out[{"scsi": "scsi0", "virtio-serial": "vser0"}[el.get("type", "")]] = s
    out.update(_qemu_slots(re.findall(r'<qemu:arg value="([^"]*)"', xml)))
    return out


def _guests() -> list[tuple[LoadedLab, tuple[str, ...]]]:
    out: list[tuple[LoadedLab, tuple[str, ...]]] = []
    for path in LAB_FILES:
        for loaded in load_lab(path).variants().values():
            out.extend((loaded, address) for address, _ in loaded.lab.walk())
    return out


GUESTS = _guests()


@pytest.mark.parametrize(
    ("loaded", "address"),
    GUESTS,
    ids=[f"{lo.lab.name}-{lo.variant or 'as-written'}-{'/'.join(a)}" for lo, a in GUESTS],
)
def test_each_device_has_one_slot_in_both_renderings(
    loaded: LoadedLab, address: tuple[str, ...]
) -> None:
    guest = loaded.lab.find("/".join(address))
    assert guest is not None
    target = target_for(loaded, address, "tcg")
    qemu = _qemu_slots(render_qemu(guest, target).argv)
    assert qemu == _xml_slots(render_libvirt(guest, target))
    if guest.machine != "microvm":
        assert {"vser0", "rng"} <= set(qemu)
        assert len(set(qemu.values())) == len(qemu)  # no two devices share a slot
        nic_slots = [qemu[m] for m in qemu if ":" in m]
        assert nic_slots == sorted(nic_slots)  # the guest enumerates NICs in lab order


def test_the_shipped_labs_cover_nics_through_qemu_commandline() -> None:
    """The case that made the NIC order differ: a forwarding user NIC beside others."""
    loaded = load_lab(next(p for p in LAB_FILES if p.stem == "multiqueue"))
    guest = loaded.lab.find("vm")
    assert guest is not None
    xml = render_libvirt(guest, target_for(loaded, ("vm",), "tcg"))
    assert (
        "qemu:commandline" in xml and len(_xml_slots(xml)) == len(guest.nics) + 3
    )  # share, vser0, rng


def test_a_full_root_bus_leaves_the_rest_to_the_backend_and_says_so() -> None:
    plan = plan_slots("q35", share=True, scsi=False, blk_disks=range(4), nics=28)
    assert len(plan.slots) == 30 and max(plan.slots.values()) == 0x1E
    assert plan.unplaced == ("nic25", "nic26", "nic27", "vser0", "rng")
    assert plan.options("rng") == {}
    pc = plan_slots("pc", share=False, scsi=True, blk_disks=[], nics=1)
    assert pc.options("scsi0") == {"bus": "pci.0", "addr": "0x2"}  # the PIIX3 is slot 1
    assert plan_slots("microvm", share=True, scsi=False, blk_disks=[0], nics=1).slots == {}
