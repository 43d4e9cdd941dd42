"""Guest-physical ranges of a guest's PCI devices (QMP ``query-pci``), to name MMIO exits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Region = tuple[int, int, str]


def pci_regions(reply: Iterable[dict[str, Any]]) -> list[Region]:
    """(start, size, name) of every memory BAR, through bridges; name from the device."""
    out: list[Region] = []
    for bus in reply:
        out.extend(_devices(bus.get("devices", [])))
    return out


def _devices(devices: Iterable[dict[str, Any]]) -> list[Region]:
    out: list[Region] = []
    for dev in devices:
        info = dev.get("class_info", {})
        desc = info.get("desc") or f"class 0x{info.get('class', 0):04x}"
        ident = dev.get("qdev_id") or ""
        where = f"{dev.get('bus', 0):02x}:{dev.get('slot', 0):02x}.{dev.get('function', 0)}"
        label = f"{desc} {ident} ({where})" if ident else f"{desc} ({where})"
        if _is_virtio(dev):
            label = "virtio " + label
        for region in dev.get("regions", []):
            if region.get("type") == "memory" and region.get("size"):
                out.append((int(region["address"]), int(region["size"]),
                            f"{label} BAR{region.get('bar', '?')}"))  # fmt: skip
        out.extend(_devices(dev.get("pci_bridge", {}).get("devices", [])))
    return out


def _is_virtio(dev: dict[str, Any]) -> bool:
    return int(dev.get("id", {}).get("vendor", 0)) == 0x1AF4


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
        while parents and parents[-1][0] >= indent:
            parents.pop()
        label = name.strip()
        if parents and ":" in parents[-1][1]:  # a driver inside a device's BAR
            label = f"{parents[-1][1]} {label}"
        parents.append((indent, name.strip()))
        if label not in ("Reserved", "System RAM") and not label.startswith("PCI Bus"):
            out.append((first, last - first + 1, label))
    return sorted(out, key=lambda r: r[1])
