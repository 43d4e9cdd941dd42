"""Where and how a guest is rendered for: accelerator, directories, binary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvmlab.errors import RenderError
from kvmlab.render.libvirt_caps import LOG_DIR, LibvirtCaps
from kvmlab.render.runfiles import UNIX_PATH_MAX
from kvmlab.spec import Guest, VhostUserNic

Accel = Literal["kvm", "tcg"]
ShareKind = Literal["9p", "virtiofs", "none"]


@dataclass(frozen=True)
class BootImage:
    """The built default guest image, for guests with ``boot = "image"``.

    The runtime fills this from the image cache; ``append`` is the image's kernel
    command line for this guest (hostname, KVM for guest hypervisors), before the
    lab's own ``append``.
    """

    kernel: Path
    initrd: Path
    append: str
    share: ShareKind
    share_tag: str


@dataclass(frozen=True)
class Target:
    """What a renderer needs beyond the spec; the caller decides it (rendering is pure).

    ``auto_accel`` and ``auto_reason`` are what ``accel = "auto"`` resolves to on the
    host the guest will run on (the CLI asks :mod:`kvmlab.host` for the top level).
    """

    lab: str
    address: tuple[str, ...]
    lab_dir: Path
    run_dir: Path
    auto_accel: Accel
    auto_reason: str
    image: BootImage | None = None
    virt_flag: Literal["vmx", "svm"] | None = None
    """The host CPU's virtualization flag, exposed to guest hypervisors with a named model."""
    qemu_binary: str = "/usr/bin/qemu-system-x86_64"
    switch_dir: Path | None = None
    """Where the lab's switch makes its ports' sockets (``<port>.sock``); None: no switch."""
    switch_kind: str | None = None
    """``testpmd`` (its ports are socket servers) or ``ovs-dpdk`` (clients)."""
    libvirt: LibvirtCaps | None = None
    """The libvirt the domain XML is rendered for (None: the library's version, assumed)."""
    libvirt_token: str | None = None
    """A token the domain carries in its metadata: what marks it as this kvmlab run's, so
    nothing else of that name or UUID is ever stopped or undefined."""
    seed_image: Path | None = None
    """Where the guest's cloud-init seed is (None: :data:`SEED_IMAGE` in its run directory;
    on libvirt, the volume kvmlab uploaded it to)."""
    libvirt_as_root: str | None = None
    """Why libvirt runs this domain's QEMU as root (a DAC label of its own), or None: as
    libvirt's QEMU user."""

    @property
    def name(self) -> str:
        """The domain/process name: ``lab-l1-l2``."""
        return "-".join((self.lab, *self.address))

    def accel_for(self, guest: Guest) -> tuple[Accel, str]:
        """The accelerator this guest runs with, and why."""
        if guest.accel == "auto":
            return self.auto_accel, f"accel auto -> {self.auto_accel}: {self.auto_reason}"
        return guest.accel, f"accel {guest.accel}: set in the lab file"

    def path(self, value: str) -> Path:
        """A lab-file path made absolute against the lab's folder."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.lab_dir / p

    def switch_socket(self, port: str) -> Path:
        """The socket of a port of the lab's switch (:class:`RenderError` without a switch)."""
        if self.switch_dir is None:
            raise RenderError(self.name, f"switch port {port!r}: the lab has no [switch]")
        path = self.switch_dir / f"{port}.sock"
        if len(str(path).encode()) > UNIX_PATH_MAX:
            raise RenderError(
                self.name,
                f"switch port socket {path} is longer than a unix "
                f"socket path may be ({UNIX_PATH_MAX} bytes); use a shorter "
                "KVMLAB_RUN_DIR",
            )
        return path

    def vhost_user(self, nic: VhostUserNic) -> tuple[Path, str, int | None]:
        """Socket, QEMU's role on it and the reconnect interval of a vhost-user NIC: as given,
        or for a switch port, what the switch needs (a client reconnects every second, so a
        restarted switch gets its guest back)."""
        if nic.port is None:
            assert nic.socket is not None
            return self.path(nic.socket), nic.mode, nic.reconnect
        mode = "client" if self.switch_kind == "testpmd" else "server"
        reconnect = (nic.reconnect or 1) if mode == "client" else None
        return self.switch_socket(nic.port), mode, reconnect

    def libvirt_log(self, kind: str) -> Path:
        """A file libvirt's QEMU writes for this domain (``serial``, ``probe``): in libvirt's
        own log directory, which exists on every libvirt host, local or remote."""
        return Path(LOG_DIR) / f"{self.name}-{kind}.log"

    def run_path(self, name: str) -> Path:
        """A file in the guest's private run directory (sockets, logs)."""
        return self.run_dir / name
