"""Where and how a guest is rendered for: accelerator, directories, binary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvmlab.spec import Guest

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

    def run_path(self, name: str) -> Path:
        """A file in the guest's private run directory (sockets, logs)."""
        return self.run_dir / name
