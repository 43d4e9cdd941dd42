"""The OS section: machine type, direct kernel boot, platform features."""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.argv import QemuArgs
from kvmlab.render.target import Target
from kvmlab.render.xmldom import DomainXml, sub
from kvmlab.spec import Guest


@dataclass(frozen=True)
class BootPart:
    """``-kernel/-initrd/-append`` and libvirt ``<os>``, ``<features>``, lifecycle actions."""

    guest: Guest
    target: Target

    def qemu(self, q: QemuArgs) -> None:
        g = self.guest
        if g.kernel is not None:
            q.add("-kernel", str(self.target.path(g.kernel)))
            if g.initrd is not None:
                q.add("-initrd", str(self.target.path(g.initrd)))
            if g.append is not None:
                q.add("-append", g.append)

    def xml(self, d: DomainXml) -> None:
        g = self.guest
        os_el = d.section("os")
        sub(os_el, "type", "hvm", arch="x86_64", machine=g.machine)
        if g.kernel is not None:
            sub(os_el, "kernel", str(self.target.path(g.kernel)))
            if g.initrd is not None:
                sub(os_el, "initrd", str(self.target.path(g.initrd)))
            if g.append is not None:
                sub(os_el, "cmdline", g.append)
        features = d.section("features")
        sub(features, "acpi")
        sub(features, "apic")
        d.section("on_poweroff").text = "destroy"
        d.section("on_reboot").text = "restart"
        d.section("on_crash").text = "destroy"
