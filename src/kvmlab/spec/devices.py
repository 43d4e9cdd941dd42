"""Disks and NICs of a guest."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from kvmlab.spec.base import SpecModel
from kvmlab.spec.units import (
    NAME_PATTERN,
    Ipv4,
    Ipv4Interface,
    KeyLine,
    Mac,
    PathText,
    Size,
    number_text,
    quoted,
)


def _mount_point(value: str) -> str:
    """A mount point in the guest: absolute, normalised, not its root."""
    parts = value.split("/")[1:]
    if value == "/" or any(p in ("", ".", "..") for p in parts):
        raise ValueError(
            f"{quoted(value)} is not a folder to mount a disk on: give a normalised "
            "absolute path other than '/' (no '.', '..', '//' or trailing /), e.g. '/data'"
        )
    return value


class Disk(SpecModel):
    """A disk backed by an image file on the host."""

    path: PathText
    """Image file; a relative path is relative to the lab file."""

    format: Literal["qcow2", "raw"] = "qcow2"
    """Image format."""

    size: Size | None = None
    """Create the image with this size when it does not exist (at run time)."""

    bus: Literal["virtio-blk", "virtio-scsi"] = "virtio-blk"
    """`virtio-blk` (one PCI device per disk) or `virtio-scsi` (disks on one SCSI controller)."""

    cache: Literal["none", "writeback", "writethrough", "directsync", "unsafe"] = "none"
    """Host page-cache mode, as libvirt names it; `none` is O_DIRECT, what benchmarks want."""

    aio: Literal["threads", "native", "io_uring"] = "threads"
    """Host I/O engine; `native` (Linux AIO) needs cache `none` or `directsync`."""

    iothread: bool = False
    """Serve this disk (or its SCSI controller) from a dedicated QEMU I/O thread."""

    readonly: bool = False
    """Attach the disk read-only."""

    serial: str | None = Field(default=None, max_length=20, pattern=r"^[A-Za-z0-9_.-]+$")
    """Serial number the guest sees (/dev/disk/by-id)."""

    mount: Annotated[str, AfterValidator(_mount_point)] | None = Field(
        default=None, pattern=r"^/[A-Za-z0-9_./-]*$"
    )
    """Default image only: make an ext4 file system on this disk (when it has none) and mount
    it here in the guest, e.g. for the disk images of a guest hypervisor's own guests, which
    need O_DIRECT (the guest's root is a tmpfs overlay). Disks without it are raw scratch
    disks for fio."""


class CloudInit(SpecModel):
    """A NoCloud seed kvmlab writes for a disk image that runs cloud-init."""

    user: str = Field(default="kvmlab", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    """The user cloud-init creates (with passwordless sudo)."""

    ssh_keys: list[KeyLine] = Field(default=[], max_length=100)
    """Public keys authorised for the user; empty: the ~/.ssh/*.pub keys of whoever runs kvmlab."""

    agent: bool = True
    """Enable and start qemu-guest-agent, which kvmlab drives the guest through."""


class Forward(SpecModel):
    """A host port forwarded to a guest port (user networking)."""

    host_port: int = Field(ge=1, le=65535)
    """Port on the host."""

    guest_port: int = Field(ge=1, le=65535)
    """Port in the guest."""

    proto: Literal["tcp", "udp"] = "tcp"
    """Protocol."""

    host_addr: Ipv4 = IPv4Address("127.0.0.1")
    """Host address to listen on; loopback unless you ask for more."""


class NicBase(SpecModel):
    """What every NIC has."""

    model: Literal["virtio", "e1000e"] = "virtio"
    """Guest device model: `virtio` (virtio-net) or `e1000e` (emulated Intel)."""

    mac: Mac | None = None
    """MAC address; unset gives a stable address derived from lab, guest and NIC index."""

    queues: int = Field(default=1, ge=1, le=256)
    """Queue pairs (multiqueue); more than 1 needs the `virtio` model."""

    rx_queue_size: int | None = None
    """Virtio RX ring size: a power of two from 256 to 1024."""

    tx_queue_size: int | None = None
    """Virtio TX ring size: a power of two from 256 to 1024 (QEMU honours it for vhost-user)."""

    @field_validator("rx_queue_size", "tx_queue_size")
    @classmethod
    def _ring_size(cls, value: int | None) -> int | None:
        if value is not None and (value not in (256, 512, 1024)):
            raise ValueError(f"ring size {number_text(value)} is not 256, 512 or 1024: use one")
        return value


class UserNic(NicBase):
    """User-mode networking (slirp): no privileges, NAT to the host, port forwards."""

    type: Literal["user"]
    """`user`"""

    forwards: list[Forward] = []
    """Host ports forwarded into the guest, e.g. `[{ host_port = 2222, guest_port = 22 }]`."""


class TapNic(NicBase):
    """A host tap device; with `vhost-net` the kernel's vhost-net moves the packets."""

    type: Literal["tap", "vhost-net"]
    """`tap` (QEMU moves packets) or `vhost-net` (the kernel's vhost-net does)."""

    ifname: str | None = Field(default=None, max_length=15, pattern=r"^[A-Za-z0-9_.-]+$")
    """Tap device name; unset lets QEMU create one. Not with `network` (kvmlab names it)."""

    network: str | None = Field(default=None, pattern=NAME_PATTERN)
    """A network of the lab (`[networks.NAME]`): kvmlab's tap on its bridge, in the lab's
    own network namespace, with `address` configured in the guest."""

    address: Ipv4Interface | None = None
    """With `network`: the guest's address on it (`10.77.0.11`, in the network's subnet);
    unset: the next free one from `.10` up, in lab order."""


class VhostUserNic(NicBase):
    """A vhost-user port served by a userspace switch (DPDK testpmd, OVS-DPDK)."""

    type: Literal["vhost-user"]
    """`vhost-user`"""

    socket: PathText | None = None
    """Unix socket path of a switch kvmlab does not run; a relative path is relative to the
    lab file. Give this or `port`."""

    port: str | None = Field(default=None, pattern=NAME_PATTERN)
    """A port of the lab's `[switch]`: kvmlab makes the socket in the lab's run directory
    and sets `mode` to what the switch needs. Give this or `socket`."""

    mode: Literal["client", "server"] = "client"
    """QEMU's role on the socket, as libvirt's `mode`: `client` for testpmd `net_vhost` ports,
    `server` for OVS `dpdkvhostuserclient` ports (with `port`, kvmlab decides)."""

    reconnect: int | None = Field(default=None, ge=1, le=3600)
    """In client mode, seconds between reconnect attempts when the switch restarts."""

    address: Ipv4Interface | None = None
    """With `port`: configure this address (`10.78.0.11/24`) in the guest, whose kernel
    virtio-net driver keeps the NIC (guest-to-guest networking through the switch, which
    pairs neighbouring ports); unset: the NIC is left to the guest (e.g. DPDK for PVP)."""

    @model_validator(mode="after")
    def _socket_or_port(self) -> VhostUserNic:
        if (self.socket is None) == (self.port is None):
            raise ValueError(
                "give either socket (a switch of your own) or port (a port of the lab's [switch])"
            )
        return self


Nic = Annotated[UserNic | TapNic | VhostUserNic, Field(discriminator="type")]
NIC_TYPES = ("user", "tap", "vhost-net", "vhost-user")
