"""Guest-physical ranges of a guest's PCI devices (QMP ``query-pci``), to name MMIO exits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Region = tuple[int, int, str]


def pci_regions(reply: Iterable[dict[str, Any]]) -> list[Region]:
    """(start, size, name) of every memory BAR, through bridges; name from the device.
    What is not of ``query-pci``'s shape is left out (names only; nothing depends on it)."""
    out: list[Region] = []
    for bus in reply if isinstance(reply, list) else []:
        if isinstance(bus, dict):
            out.extend(_devices(bus.get("devices")))
    return out


def _devices(devices: object) -> list[Region]:
    out: list[Region] = []
    for dev in devices if isinstance(devices, list) else []:
        if not isinstance(dev, dict):
            continue
        info = _dict(dev, "class_info")
        desc = info.get("desc") or f"class 0x{_int(info, 'class'):04x}"
        ident = dev.get("qdev_id") or ""
        where = f"{_int(dev, 'bus'):02x}:{_int(dev, 'slot'):02x}.{_int(dev, 'function')}"
        label = f"{desc} {ident} ({where})" if ident else f"{desc} ({where})"
        if _int(_dict(dev, "id"), "vendor") == 0x1AF4:
            label = "virtio " + label
        regions = dev.get("regions")
        for region in regions if isinstance(regions, list) else []:
            if isinstance(region, dict) and region.get("type") == "memory":
                start, size = _int(region, "address"), _int(region, "size")
                if size > 0:
                    out.append((start, size, f"{label} BAR{region.get('bar', '?')}"))
        out.extend(_devices(_dict(dev, "pci_bridge").get("devices")))
    return out


def _dict(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _int(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    return value if type(value) is int and value >= 0 else 0


def iomem_regions(text: str) -> list[Region]:
    """(start, size, name) from a guest's ``/proc/iomem``, smallest first: its own view of
    its physical address map (BARs named by device and driver: ``0000:00:01.0
    virtio-pci-modern``), readable through the agent at any level."""
    out: list[Region] = []
    parents: list[tuple[int, str]] = []  # (indent, name) of the enclosing ranges
    for line in text.splitlines():
        span, sep, name = line.partition(" : ")
        if not sep:
            continue
        indent = len(span) - len(span.lstrip())
        try:
            first, last = (int(v, 16) for v in span.strip().split("-"))
        except ValueError:
            continue
        if last < first or last == 0:  # all zero: read without root, which hides addresses
            continue
        while parents and parents[-1][0] >= indent:
            parents.pop()
        label = name.strip()
        if parents and ":" in parents[-1][1]:  # a driver inside a device's BAR
            label = f"{parents[-1][1]} {label}"
        parents.append((indent, name.strip()))
        if label not in ("Reserved", "System RAM") and not label.startswith("PCI Bus"):
            out.append((first, last - first + 1, label))
    return sorted(out, key=lambda r: r[1])
