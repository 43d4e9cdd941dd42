"""NICs: user (slirp), tap and vhost-net, vhost-user; virtio-net or e1000e frontends."""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.argv import QemuArgs, opts
from kvmlab.render.devices.slots import NO_SLOTS, PciSlots
from kvmlab.render.identity import derived_mac, tap_name
from kvmlab.render.target import Accel, Target
from kvmlab.render.xmldom import DomainXml, sub
from kvmlab.spec import Nic, TapNic, UserNic, VhostUserNic

TCG_VHOST_USER_NOTE = (
    "vhost-user under TCG: vectors=0 (QEMU 7.2 with TCG crashes when the guest driver "
    "starts a vhost-user virtio-net with MSI-X)"
)


@dataclass(frozen=True)
class NicPart:
    """One NIC: its backend (-netdev, -chardev) and its frontend device."""

    nic: Nic
    index: int
    target: Target
    accel: Accel
    slots: PciSlots = NO_SLOTS

    @property
    def mac(self) -> str:
        """The configured MAC, or one derived from lab, guest and index."""
        return self.nic.mac or derived_mac(self.target.lab, self.target.address, self.index)

    @property
    def ifname(self) -> str | None:
        """The tap's name: kvmlab's for a NIC on a lab network, else the lab's (or QEMU's)."""
        nic = self.nic
        if isinstance(nic, TapNic) and nic.network is not None:
            return tap_name(self.target.lab, self.target.address, self.index)
        return nic.ifname if isinstance(nic, TapNic) else None

    @property
    def msix_off(self) -> bool:
        """Whether this NIC must run without MSI-X (the QEMU 7.2 TCG vhost-user crash)."""
        return isinstance(self.nic, VhostUserNic) and self.accel == "tcg"

    def _passt(self) -> bool:
        """Whether the libvirt rendered for takes the passt backend (port forwards)."""
        caps = self.target.libvirt
        return caps is not None and caps.passt

    def _slirp_commandline(self, d: DomainXml, nic: UserNic) -> None:
        """A user NIC with port forwards for a libvirt without passt: libvirt's own
        ``type='user'`` cannot forward, so QEMU gets the NIC as slirp with hostfwd, the
        way kvmlab's QEMU backend starts it (libvirt then marks the domain tainted)."""
        net = f"kvnet{self.index}"
        fwd = [
            f"hostfwd={f.proto}:{f.host_addr}:{f.host_port}-:{f.guest_port}" for f in nic.forwards
        ]
        model = "e1000e" if nic.model == "e1000e" else "virtio-net-pci"
        d.commandline(
            "-netdev",
            ",".join(["user", f"id={net}", *fwd]),
            "-device",
            opts(
                model,
                id=f"kvnic{self.index}",
                netdev=net,
                mac=self.mac,
                **self.slots.options(f"nic{self.index}"),
            ),
        )
        d.note(
            f"interface {self.index}: port forwards through QEMU's own slirp "
            "(qemu:commandline): this libvirt has no passt backend"
        )

    def qemu(self, q: QemuArgs) -> None:
        nic, net = self.nic, f"net{self.index}"
        queues = nic.queues if nic.queues > 1 else None
        if isinstance(nic, UserNic):
            fwd = [
                f"hostfwd={f.proto}:{f.host_addr}:{f.host_port}-:{f.guest_port}"
                for f in nic.forwards
            ]
            q.add("-netdev", ",".join(["user", f"id={net}", *fwd]))
        elif isinstance(nic, TapNic):
            q.add(
                "-netdev",
                opts(
                    "tap",
                    id=net,
                    ifname=self.ifname,
                    script="no",
                    downscript="no",
                    vhost=nic.type == "vhost-net",
                    queues=queues,
                ),
            )
        else:
            chardev = f"chr-{net}"
            path, mode, reconnect = self.target.vhost_user(nic)
            server = mode == "server"
            q.add(
                "-chardev",
                opts(
                    "socket",
                    id=chardev,
                    path=str(path),
                    server=True if server else None,
                    wait=False if server else None,
                    reconnect=reconnect,
                ),
            )
            q.add("-netdev", opts("vhost-user", id=net, chardev=chardev, queues=queues))
        if nic.model == "e1000e":
            q.add(
                "-device",
                opts(
                    "e1000e",
                    id=f"nic{self.index}",
                    netdev=net,
                    mac=self.mac,
                    **self.slots.options(f"nic{self.index}"),
                ),
            )
            return
        vectors: int | None = 2 * nic.queues + 2 if queues and q.pci else None
        if self.msix_off and q.pci:
            vectors = 0
            q.note(TCG_VHOST_USER_NOTE)
        q.add(
            "-device",
            opts(
                q.virtio("net"),
                id=f"nic{self.index}",
                netdev=net,
                mac=self.mac,
                mq=True if queues else None,
                vectors=vectors,
                rx_queue_size_=nic.rx_queue_size,
                tx_queue_size_=nic.tx_queue_size,
                **self.slots.options(f"nic{self.index}"),
            ),
        )

    def xml(self, d: DomainXml) -> None:
        nic = self.nic
        if isinstance(nic, UserNic) and nic.forwards and not self._passt():
            self._slirp_commandline(d, nic)
            return
        if isinstance(nic, UserNic):
            el = sub(d.devices, "interface", type="user")
        elif isinstance(nic, TapNic):
            el = sub(d.devices, "interface", type="ethernet")
        else:
            el = sub(d.devices, "interface", type="vhostuser")
        sub(el, "mac", address=self.mac)
        if isinstance(nic, VhostUserNic):
            path, mode, reconnect = self.target.vhost_user(nic)
            src = sub(el, "source", type="unix", path=str(path), mode=mode)
            if reconnect:
                sub(src, "reconnect", enabled="yes", timeout=reconnect)
        if isinstance(nic, TapNic) and self.ifname:
            # a network's tap (kvmlab's name, checked free) libvirt makes and deletes; a tap
            # the lab names is the user's, never libvirt's to delete
            sub(el, "target", dev=self.ifname, managed=None if nic.network else "no")
        sub(el, "model", type="virtio" if nic.model == "virtio" else "e1000e")
        if isinstance(nic, UserNic) and nic.forwards:
            sub(el, "backend", type="passt")
            for fwd in nic.forwards:
                pf = sub(el, "portForward", proto=fwd.proto, address=str(fwd.host_addr))
                sub(pf, "range", start=fwd.host_port, to=fwd.guest_port)
        driver = {
            "name": "vhost" if nic.type == "vhost-net" else ("qemu" if nic.type == "tap" else None),
            "queues": nic.queues if nic.queues > 1 else None,
            "rx_queue_size": nic.rx_queue_size,
            "tx_queue_size": nic.tx_queue_size,
        }
        if any(v is not None for v in driver.values()):
            sub(el, "driver", **driver)
        self.slots.address(el, f"nic{self.index}")
        if self.msix_off:
            alias = f"ua-net{self.index}"
            sub(el, "alias", name=alias)
            d.override(alias, "vectors", "unsigned", "0")
            d.note(TCG_VHOST_USER_NOTE)
