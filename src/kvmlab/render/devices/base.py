"""What every part of a rendered guest implements."""

from __future__ import annotations

from typing import Protocol

from kvmlab.render.argv import QemuArgs
from kvmlab.render.xmldom import DomainXml


class Part(Protocol):
    """A piece of a guest that knows its QEMU options and its libvirt XML."""

    def qemu(self, q: QemuArgs) -> None:
        """Add this part's options to the QEMU command line."""

    def xml(self, d: DomainXml) -> None:
        """Add this part's elements to the libvirt domain."""
