"""The guest enumerates NICs by PCI slot: under libvirt a user NIC with port forwards goes
through qemu:commandline at a root-bus slot, so every interface of that guest takes a
root-bus slot in NIC order too, and the guest sees the lab's order under either backend."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from kvmlab.render import render_libvirt, render_qemu
from kvmlab.spec import load_lab
from tests.conftest import LABS, target_for


def test_every_nic_takes_its_slot_in_lab_order_beside_a_commandline_one() -> None:
    loaded = load_lab(LABS / "multiqueue.toml")
    guest = loaded.lab.find("vm")
    assert guest is not None
    target = target_for(loaded, ("vm",), "tcg")
    xml = render_libvirt(guest, target)
    root = ET.fromstring(xml)
    slots = {
        i.find("mac").get("address"): int(i.find("address").get("slot"), 16)  # type: ignore[union-attr,arg-type]
        for i in root.iter("interface")
    }
    commandline = re.search(r"mac=([0-9a-f:]+),bus=pcie\.0,addr=0x([0-9a-f]+)", xml)
    assert commandline is not None
    slots[commandline.group(1)] = int(commandline.group(2), 16)
    macs = [
        line.split("mac=")[1].split(",")[0]
        for line in render_qemu(guest, target).argv
        if line.startswith("virtio-net-pci,")
    ]
    assert sorted(slots, key=lambda m: slots[m]) == macs  # the QEMU backend's order
    assert sorted(slots.values()) == [0x10, 0x11, 0x12]


def test_a_guest_without_a_commandline_nic_leaves_addresses_to_libvirt() -> None:
    loaded = load_lab(LABS / "netcompare.toml")
    for name in ("vm1", "vm2"):
        guest = loaded.lab.find(name)
        assert guest is not None
        xml = render_libvirt(guest, target_for(loaded, (name,), "tcg"))
        assert all(i.find("address") is None for i in ET.fromstring(xml).iter("interface"))
