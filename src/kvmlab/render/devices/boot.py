"""The OS section: machine type, what boots (default image, kernel, disk), platform features."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import RenderError
from kvmlab.render.argv import QemuArgs, opts
from kvmlab.render.devices.slots import NO_SLOTS, PciSlots
from kvmlab.render.target import BootImage, Target
from kvmlab.render.xmldom import DomainXml, sub
from kvmlab.spec import Guest
from kvmlab.spec.guest_kvm import kernel_parameters

VIRTIOFS_SOCKET = "virtiofsd.sock"


@dataclass(frozen=True)
class BootPart:
    """``-kernel/-initrd/-append`` (and the host share of the default image), libvirt ``<os>``."""

    guest: Guest
    target: Target
    slots: PciSlots = NO_SLOTS

    @property
    def image(self) -> BootImage | None:
        """The default image when the guest boots it (a RenderError if none was supplied)."""
        if self.guest.boot != "image":
            return None
        if self.target.image is None:
            raise RenderError(self.target.name, "boots the default image, but none was given")
        return self.target.image

    def _kernel(self) -> tuple[Path, Path | None, str | None] | None:
        g, image = self.guest, self.image
        words = [g.append] if g.append else []
        if g.kvm is not None:  # the guest hypervisor's KVM module takes its own
            words += kernel_parameters(g.kvm)
        if image is not None:
            return image.kernel, image.initrd, " ".join([image.append, *words])
        if g.boot == "kernel" and g.kernel is not None:
            initrd = self.target.path(g.initrd) if g.initrd else None
            return self.target.path(g.kernel), initrd, " ".join(words) or None
        return None

    def qemu(self, q: QemuArgs) -> None:
        if q.pci:  # SeaBIOS tries only the devices given a boot index, as under libvirt
            q.add("-boot", "strict=on")
        boot = self._kernel()
        if boot is not None:
            kernel, initrd, append = boot
            q.add("-kernel", str(kernel))
            if initrd is not None:
                q.add("-initrd", str(initrd))
            if append is not None:
                q.add("-append", append)
        image = self.image
        if image is None:
            return
        q.note("boot image: a failed init panics (panic=-1) and -no-reboot makes QEMU exit")
        q.add("-no-reboot")
        if image.share == "none":
            return
        if image.share == "9p":
            q.add(
                "-fsdev",
                opts(
                    "local",
                    id="hostfs",
                    path="/",
                    security_model_="passthrough",
                    readonly=True,
                    multidevs="remap",
                ),
            )
            q.add(
                "-device",
                opts(
                    q.virtio("9p"),
                    fsdev="hostfs",
                    mount_tag_=image.share_tag,
                    **self.slots.options("share"),
                ),
            )
        else:
            sock = self.target.run_path(VIRTIOFS_SOCKET)
            q.add("-chardev", opts("socket", id="hostfs", path=str(sock)))
            kind = "vhost-user-fs-pci" if q.pci else "vhost-user-fs-device"
            q.add(
                "-device",
                opts(kind, chardev="hostfs", tag=image.share_tag, **self.slots.options("share")),
            )

    def xml(self, d: DomainXml) -> None:
        g = self.guest
        os_el = d.section("os")
        sub(os_el, "type", "hvm", arch="x86_64", machine=g.machine)
        boot = self._kernel()
        if boot is not None:
            kernel, initrd, append = boot
            sub(os_el, "kernel", str(kernel))
            if initrd is not None:
                sub(os_el, "initrd", str(initrd))
            if append is not None:
                sub(os_el, "cmdline", append)
        features = d.section("features")
        sub(features, "acpi")
        sub(features, "apic")
        d.section("on_poweroff").text = "destroy"
        d.section("on_reboot").text = "destroy" if self.image else "restart"
        d.section("on_crash").text = "destroy"
        image = self.image
        if image is not None and image.share != "none":
            driver = "path" if image.share == "9p" else "virtiofs"
            fs = sub(
                d.devices,
                "filesystem",
                type="mount",
                accessmode="passthrough",
                multidevs="remap" if image.share == "9p" else None,
            )
            sub(fs, "driver", type=driver)
            sub(fs, "source", dir="/")
            sub(fs, "target", dir=image.share_tag)
            if image.share == "9p":
                sub(fs, "readonly")
            self.slots.address(fs, "share")
