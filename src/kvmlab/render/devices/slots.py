"""Where each PCI device of a guest sits: one plan both renderers follow.

Left to themselves the backends place devices differently: QEMU fills the root bus in the
order of its ``-device`` options, while libvirt puts each device behind a PCIe root port of
its own (a bus per device, modern-only virtio) and adds a USB controller. The guest would
see another PCI tree, other device IDs and, with a NIC through ``qemu:commandline``,
another NIC order. So kvmlab gives every device an address on the root bus, the same in the
QEMU command line (``bus=pcie.0,addr=0x3``) and in the domain (``<address slot='0x03'/>``),
in this order: the host share, the SCSI controller, the virtio-blk disks, the NICs, the
virtio-serial controller (agent channels), the RNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal
from xml.etree.ElementTree import Element

from kvmlab.render.argv import QemuArgs
from kvmlab.render.xmldom import DomainXml, sub

FIRST_SLOT = {"q35": 0x01, "pc": 0x02}
"""The first free slot on the root bus: q35's host bridge is slot 0, the i440fx's PIIX3
functions take slot 1."""
LAST_SLOT = {"q35": 0x1E, "pc": 0x1F}
"""The last one: q35's ICH9 functions (LPC, SATA, SMBus) are at slot 0x1f."""
ROOT_BUS = {"q35": "pcie.0", "pc": "pci.0"}


@dataclass(frozen=True)
class PciSlots:
    """Root-bus slots by device key (``share``, ``scsi0``, ``disk0``, ``nic0``, ``vser0``,
    ``rng``). A device without one is placed by the backend: on microvm (no PCI), or past
    the last slot (a note says so). As a part it pins what libvirt would add: no USB."""

    machine: str = "microvm"
    slots: dict[str, int] = field(default_factory=dict)
    unplaced: tuple[str, ...] = ()

    def options(self, key: str) -> dict[str, str]:
        """The device's QEMU ``bus`` and ``addr`` options, or none."""
        slot = self.slots.get(key)
        if slot is None:
            return {}
        return {"bus": ROOT_BUS[self.machine], "addr": f"0x{slot:x}"}

    def address(self, element: Element, key: str) -> None:
        """Give ``element`` (a libvirt device) its ``<address>``, if the plan has one."""
        slot = self.slots.get(key)
        if slot is not None:
            sub(
                element,
                "address",
                type="pci",
                domain="0x0000",
                bus="0x00",
                slot=f"0x{slot:02x}",
                function="0x0",
            )

    def _note(self) -> str | None:
        if not self.unplaced:
            return None
        return (
            f"the root bus is full: {', '.join(self.unplaced)} placed by the backend, so the "
            "guest may see them at other addresses under QEMU and libvirt"
        )

    def qemu(self, q: QemuArgs) -> None:
        if note := self._note():
            q.note(note)

    def xml(self, d: DomainXml) -> None:
        if self.machine != "microvm":  # QEMU's -nodefaults guest has no USB controller
            sub(d.devices, "controller", type="usb", model="none")
        if note := self._note():
            d.note(note)


NO_SLOTS = PciSlots()
"""No plan: every device placed by the backend (parts built on their own, in tests)."""


def plan_slots(
    machine: Literal["q35", "pc", "microvm"],
    share: bool,
    scsi: bool,
    blk_disks: Sequence[int],
    nics: int,
) -> PciSlots:
    """The plan for a guest's devices, in the order the module's docstring gives."""
    if machine == "microvm":
        return PciSlots()
    keys = [
        *(["share"] if share else []),
        *(["scsi0"] if scsi else []),
        *(f"disk{i}" for i in blk_disks),
        *(f"nic{i}" for i in range(nics)),
        "vser0",
        "rng",
    ]
    first, last = FIRST_SLOT[machine], LAST_SLOT[machine]
    room = last - first + 1
    slots = {key: first + n for n, key in enumerate(keys[:room])}
    return PciSlots(machine, slots, tuple(keys[room:]))
