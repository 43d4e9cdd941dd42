"""How kvmlab talks to a guest: QMP monitor, serial console and log, guest agent channel."""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.argv import QemuArgs, opts
from kvmlab.render.devices.slots import NO_SLOTS, PciSlots
from kvmlab.render.runfiles import (
    AGENT_SOCKET,
    CONSOLE_SOCKET,
    PID_FILE,
    PROBE_LOG,
    QMP_SOCKET,
    RELAY_SOCKET,
    SERIAL_LOG,
)
from kvmlab.render.target import Target
from kvmlab.render.xmldom import DomainXml, sub

AGENT_PORT = "org.qemu.guest_agent.0"
PROBE_PORT = "org.kvmlab.probe.0"
"""A migratable guest's heartbeat channel (the file it goes to: ``runfiles.PROBE_LOG``)."""
RELAY_PORT = "kvmlab.relay.{}"
"""A guest hypervisor's extra agent channel per guest inside it (its socket in the run
directory: ``runfiles.RELAY_SOCKET``)."""


@dataclass(frozen=True)
class ControlPart:
    """The control plane; every socket lives in the guest's private run directory."""

    target: Target
    relays: tuple[str, ...] = ()
    """Names of the guests inside this one (when it is a guest hypervisor)."""
    slots: PciSlots = NO_SLOTS

    @property
    def probe(self) -> bool:
        """Whether the guest boots the self-contained (migratable) image: a probe port."""
        image = self.target.image
        return image is not None and image.share == "none"

    def qemu(self, q: QemuArgs) -> None:
        run = self.target.run_path
        q.add(
            "-chardev", opts("socket", id="qmp", path=str(run(QMP_SOCKET)), server=True, wait=False)
        )
        q.add("-mon", "chardev=qmp,mode=control")
        q.add(
            "-chardev",
            opts(
                "socket",
                id="console",
                path=str(run(CONSOLE_SOCKET)),
                server=True,
                wait=False,
                logfile=str(run(SERIAL_LOG)),
                logappend=False,
            ),
        )
        q.add("-serial", "chardev:console")
        q.add("-device", opts(q.virtio("serial"), id="vser0", **self.slots.options("vser0")))
        q.add(
            "-chardev",
            opts("socket", id="qga0", path=str(run(AGENT_SOCKET)), server=True, wait=False),
        )
        q.add("-device", opts("virtserialport", bus="vser0.0", chardev="qga0", name=AGENT_PORT))
        for child in self.relays:
            sock = str(run(RELAY_SOCKET.format(child)))
            q.add(
                "-chardev", opts("socket", id=f"relay-{child}", path=sock, server=True, wait=False)
            )
            q.add(
                "-device",
                opts(
                    "virtserialport",
                    bus="vser0.0",
                    chardev=f"relay-{child}",
                    name=RELAY_PORT.format(child),
                ),
            )
        if self.probe:
            q.add("-chardev", opts("file", id="probe", path=str(run(PROBE_LOG))))
            q.add(
                "-device", opts("virtserialport", bus="vser0.0", chardev="probe", name=PROBE_PORT)
            )
        q.add("-device", opts(q.virtio("rng"), **self.slots.options("rng")))
        q.add("-pidfile", str(run(PID_FILE)))

    def xml(self, d: DomainXml) -> None:
        """Serial log in libvirt's log directory; agent and relay sockets left to libvirt,
        which makes them in its own channel directory (nothing has to exist beforehand)."""
        log = self.target.libvirt_log
        serial = sub(d.devices, "serial", type="pty")
        sub(serial, "log", file=str(log("serial")), append="off")
        sub(serial, "target", port=0)
        console = sub(d.devices, "console", type="pty")
        sub(console, "target", type="serial", port=0)
        serial_bus = sub(d.devices, "controller", type="virtio-serial", index=0)
        self.slots.address(serial_bus, "vser0")
        channel = sub(d.devices, "channel", type="unix")
        sub(channel, "target", type="virtio", name=AGENT_PORT)
        for child in self.relays:
            relay = sub(d.devices, "channel", type="unix")
            sub(relay, "target", type="virtio", name=RELAY_PORT.format(child))
        if self.probe:
            probe = sub(d.devices, "channel", type="file")
            sub(probe, "source", path=str(log("probe")))
            sub(probe, "target", type="virtio", name=PROBE_PORT)
        rng = sub(d.devices, "rng", model="virtio")
        sub(rng, "backend", "/dev/urandom", model="random")
        self.slots.address(rng, "rng")
        sub(d.devices, "memballoon", model="none")
