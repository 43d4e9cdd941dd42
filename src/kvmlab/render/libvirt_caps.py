"""What the libvirt in front of kvmlab can do: its version, capabilities and domain
capabilities, parsed into the few decisions the libvirt renderer makes (pure: the caller
fetches the XML, :mod:`kvmlab.runtime.libvirt` from a daemon, tests from recordings)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

LOG_DIR = "/var/log/libvirt/qemu"
"""Where libvirt's QEMU driver keeps domain logs on every distribution: kvmlab puts a
domain's serial log there, so nothing has to exist beforehand on the libvirt host."""
IMAGE_POOL_DIR = "/var/lib/libvirt/images/kvmlab"
"""Where kvmlab's transient storage pool publishes the default image's kernel and initrd."""


def version_text(number: int) -> str:
    """libvirt's version number (``9000000``) as text (``9.0.0``)."""
    return f"{number // 1_000_000}.{number // 1000 % 1000}.{number % 1000}"


def _enum(root: ET.Element | None, path: str) -> frozenset[str]:
    if root is None:
        return frozenset()
    return frozenset(v.text or "" for v in root.findall(f"{path}/value"))


@dataclass(frozen=True)
class LibvirtCaps:
    """The libvirt a domain is rendered for."""

    version: int
    """libvirt's version number (``virConnectGetLibVersion``), 9000000 for 9.0.0."""
    qemu_version: int = 0
    domain_types: frozenset[str] = frozenset({"qemu"})
    passt: bool = False
    """Whether ``<backend type='passt'/>`` is accepted (domain capabilities list it)."""
    fs_drivers: frozenset[str] = frozenset({"path"})
    cpu_modes: frozenset[str] = frozenset({"maximum", "custom"})
    memory_sources: frozenset[str] = frozenset({"file", "anonymous"})
    qemu_user: tuple[int, int] | None = None
    """The uid and gid libvirt runs QEMU as (DAC base label), when known."""
    known: bool = True
    """False for :meth:`assumed`: rendered without asking a daemon."""
    notes: tuple[str, ...] = field(default=())

    @property
    def label(self) -> str:
        """``libvirt 9.0.0`` (or what was assumed)."""
        text = f"libvirt {version_text(self.version)}"
        return text if self.known else f"{text} assumed, no daemon asked (render -c URI asks one)"

    @classmethod
    def assumed(cls, version: int) -> LibvirtCaps:
        """What kvmlab assumes of the installed libvirt library when no daemon is asked:
        nothing newer than what every supported libvirt has."""
        return cls(version=version, known=False)

    @classmethod
    def from_xml(
        cls, version: int, qemu_version: int, capabilities: str, domcapabilities: str
    ) -> LibvirtCaps:
        """Parse ``virConnectGetCapabilities`` and ``virConnectGetDomainCapabilities``."""
        caps = ET.fromstring(capabilities)
        dom = ET.fromstring(domcapabilities)
        types = frozenset(
            str(d.get("type")) for d in caps.findall("guest/arch/domain") if d.get("type")
        )
        modes = frozenset(
            str(m.get("name")) for m in dom.findall("cpu/mode") if m.get("supported") == "yes"
        )
        return cls(
            version=version,
            qemu_version=qemu_version,
            domain_types=types or frozenset({"qemu"}),
            passt="passt" in _enum(dom.find("devices/interface"), "enum[@name='backendType']"),
            fs_drivers=_enum(dom.find("devices/filesystem"), "enum[@name='driverType']"),
            cpu_modes=modes | {"custom"},
            memory_sources=_enum(dom.find("memoryBacking"), "enum[@name='sourceType']"),
            qemu_user=_dac_user(caps),
        )


def _dac_user(caps: ET.Element) -> tuple[int, int] | None:
    """``+64055:+64055`` from the DAC security model's base label, as numbers."""
    for model in caps.findall("host/secmodel"):
        if (model.findtext("model") or "") != "dac":
            continue
        for label in model.findall("baselabel"):
            uid, _, gid = (label.text or "").partition(":")
            try:
                return int(uid.lstrip("+")), int(gid.lstrip("+"))
            except ValueError:
                continue
    return None
