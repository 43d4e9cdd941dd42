"""What every import shares: the imported lab and what it leaves out or changes, names,
sizes, and the lab file written from it (validated like any lab file)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_args

from kvmlab.errors import UsageError, printable
from kvmlab.spec.machine import HypervFeature, Timers

MAX_INPUT = 4 * 1024 * 1024
"""The largest domain XML or command line read (real ones are a few KiB)."""

DEFAULT_QEMU = "/usr/bin/qemu-system-x86_64"
HYPERV: tuple[str, ...] = get_args(HypervFeature)
TIMERS: tuple[str, ...] = tuple(Timers.model_fields)
TICKPOLICIES = ("delay", "catchup", "merge", "discard")
CACHES = ("none", "writeback", "writethrough", "directsync", "unsafe")
AIO = {"threads": "threads", "native": "native", "io_uring": "io_uring"}
QUIET_DEVICES = {
    "controller": "controllers (kvmlab adds the ones its devices need)",
    "console": "consoles (kvmlab gives every guest a serial console: kvmlab console)",
    "serial": "consoles (kvmlab gives every guest a serial console: kvmlab console)",
    "memballoon": "the memory balloon",
    "input": "input devices",
    "graphics": "graphics (kvmlab's guests are headless: kvmlab console)",
    "video": "video devices",
    "sound": "sound devices",
    "rng": "random number generators",
    "emulator": "",
}


@dataclass
class Imported:
    """A lab document made from a VM, and what it does not carry over as it was."""

    doc: dict[str, Any]
    source: str
    left_out: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    networks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The lab's private networks the guest's NICs join (``[networks.NAME]``)."""

    @property
    def guest(self) -> dict[str, Any]:
        guests: dict[str, dict[str, Any]] = self.doc["guests"]
        return guests[next(iter(guests))]


def lab_name_from(text: str) -> str:
    """A valid lab or guest name (``is_name``) made from a VM's name: ``Win10_Pro`` ->
    ``win10-pro``."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = f"vm-{name}".rstrip("-")
    return name[:32].rstrip("-") or "vm"


def size_text(value: int) -> str:
    """Bytes as a lab size: ``4G``, ``1536M`` (MiB granularity, as QEMU's ``-m``)."""
    mib = max(1, value // (1024 * 1024))
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


UNITS = {
    "b": 1,
    "bytes": 1,
    "k": 1024,
    "kib": 1024,
    "kb": 1000,
    "m": 1024**2,
    "mib": 1024**2,
    "mb": 1000**2,
    "g": 1024**3,
    "gib": 1024**3,
    "gb": 1000**3,
    "t": 1024**4,
    "tib": 1024**4,
}


def bytes_of(text: str | None, unit: str | None, what: str) -> int:
    """A libvirt size (default unit KiB) in bytes."""
    factor = UNITS.get((unit or "KiB").lower())
    if text is None or not text.strip().isdigit() or factor is None:
        raise UsageError(
            f"{what}: {printable(str(text))} {printable(str(unit))} is not a size libvirt "
            "writes; give the domain's XML as virsh dumpxml prints it"
        )
    return int(text.strip()) * factor


def parse_xml(text: str, source: str) -> ET.Element:
    """The domain element of ``text``; one line naming ``source`` when it is not one."""
    if len(text) > MAX_INPUT:
        raise UsageError(f"{source}: over {MAX_INPUT // 1048576} MiB: not a domain's XML")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise UsageError(
            f"{source}: has a DOCTYPE or entities, which a domain's XML never has; "
            "give it as virsh dumpxml prints it"
        )
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise UsageError(f"{source}: not XML ({exc}); give the output of virsh dumpxml") from None
    if root.tag != "domain":
        raise UsageError(
            f"{source}: its root element is <{printable(root.tag)}>, not <domain>; "
            "give the output of virsh dumpxml NAME"
        )
    return root


def lab_file_text(imported: Imported, command: str) -> str:
    """The lab file of ``imported``, what it leaves out and changes as comments on top,
    validated as any lab file is (a :class:`~kvmlab.errors.SpecError` names what the
    loader refuses)."""
    from kvmlab.spec.load import parse_lab
    from kvmlab.spec.toml_write import lab_text

    comments = [f"Made by: {command}", f"From: {imported.source}"]
    if imported.changed:
        comments.append("Carried over differently:")
        comments += [f"  - {line}" for line in imported.changed]
    if imported.left_out:
        comments.append("Not carried over (a lab file cannot say it):")
        comments += [f"  - {line}" for line in imported.left_out]
    doc = dict(imported.doc)
    if imported.networks:
        guests = doc.pop("guests")
        doc["networks"] = imported.networks
        doc["guests"] = guests
    text = lab_text(doc, comments)
    parse_lab(text.encode(), imported.source + " (as imported)")
    return text


def naming_source(source: str, convert: Callable[[], Imported]) -> Imported:
    """``convert()``, with every refusal naming ``source`` first."""
    try:
        return convert()
    except UsageError as exc:
        if str(exc).startswith(source):
            raise
        raise UsageError(f"{source}: {exc}") from None
