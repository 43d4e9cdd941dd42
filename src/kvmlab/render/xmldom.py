"""A libvirt domain document under construction (an element tree, never strings)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)
KVMLAB_NS = "https://github.com/kvmlab/kvmlab/xmlns/guest/1"
"""The namespace of kvmlab's domain metadata (``<kvmlab:guest lab= address= token=/>``)."""
ET.register_namespace("kvmlab", KVMLAB_NS)

SECTION_ORDER = (
    "name",
    "uuid",
    "title",
    "description",
    "metadata",
    "memory",
    "currentMemory",
    "memoryBacking",
    "vcpu",
    "iothreads",
    "cputune",
    "os",
    "features",
    "cpu",
    "clock",
    "on_poweroff",
    "on_reboot",
    "on_crash",
    "devices",
    "seclabel",
    f"{{{QEMU_NS}}}commandline",
    f"{{{QEMU_NS}}}override",
)


def comment_text(text: str) -> str:
    """``text`` made fit for an XML comment: XML forbids ``--`` inside one and a ``-``
    at its end, so each hyphen that would form either is followed by a space."""
    safe = re.sub(r"-(?=-)", "- ", _printable(text))
    return f" {safe} "


def xml_comment(text: str) -> str:
    """A whole ``<!-- ... -->`` comment, for text printed beside a document."""
    return f"<!--{comment_text(text)}-->"


def _printable(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot carry (control characters)."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def sub(parent: ET.Element, tag: str, text: str | None = None, /, **attrib: object) -> ET.Element:
    """A child element; attribute values are converted with ``str`` and ``None`` ones dropped."""
    el = ET.SubElement(parent, tag, {k: str(v) for k, v in attrib.items() if v is not None})
    if text is not None:
        el.text = text
    return el


@dataclass
class DomainXml:
    """The ``<domain>`` root with its sections created on demand, in libvirt's order."""

    root: ET.Element
    notes: list[str] = field(default_factory=list)

    @classmethod
    def new(cls, domain_type: str) -> DomainXml:
        """An empty domain of ``type`` kvm or qemu."""
        return cls(ET.Element("domain", {"type": domain_type}))

    def section(self, tag: str, **attrib: object) -> ET.Element:
        """The domain's child ``tag``, created in canonical position if missing."""
        found = self.root.find(tag)
        if found is not None:
            for key, value in attrib.items():
                if value is not None:
                    found.set(key, str(value))
            return found
        el = ET.Element(tag, {k: str(v) for k, v in attrib.items() if v is not None})
        rank = SECTION_ORDER.index(tag)
        position = sum(1 for child in self.root if SECTION_ORDER.index(str(child.tag)) < rank)
        self.root.insert(position, el)
        return el

    @property
    def devices(self) -> ET.Element:
        """The ``<devices>`` section."""
        return self.section("devices")

    def note(self, text: str) -> None:
        """A comment placed at the top of the document (each text once)."""
        if text not in self.notes:
            self.notes.append(text)

    def override(self, alias: str, prop: str, kind: str, value: str) -> None:
        """Set a frontend property of the device with ``alias`` (libvirt ``<qemu:override>``)."""
        over = self.section(f"{{{QEMU_NS}}}override")
        dev = sub(over, f"{{{QEMU_NS}}}device", alias=alias)
        front = sub(dev, f"{{{QEMU_NS}}}frontend")
        sub(front, f"{{{QEMU_NS}}}property", name=prop, type=kind, value=value)

    def commandline(self, *args: str) -> None:
        """Arguments libvirt passes to QEMU as they are (``<qemu:commandline>``)."""
        cmd = self.section(f"{{{QEMU_NS}}}commandline")
        for arg in args:
            sub(cmd, f"{{{QEMU_NS}}}arg", value=arg)

    def tostring(self) -> str:
        """The document, indented, notes first as comments inside ``<domain>``."""
        for i, text in enumerate(self.notes):
            self.root.insert(i, ET.Comment(comment_text(text)))
        ET.indent(self.root, space="  ")
        try:
            text = ET.tostring(self.root, encoding="unicode") + "\n"
        finally:
            for child in [c for c in self.root if not isinstance(c.tag, str)]:
                self.root.remove(child)
        well_formed(text)
        return text


class MalformedXml(ValueError):
    """The serialised document is not well-formed XML (a character XML cannot carry in
    a text or attribute); kvmlab never prints such a document."""


def well_formed(text: str) -> None:
    """Raise :class:`MalformedXml` unless ``text`` parses as one XML document."""
    try:
        ET.fromstring(text)
    except ET.ParseError as exc:
        raise MalformedXml(str(exc)) from None
