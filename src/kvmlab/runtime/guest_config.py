"""One guest of a lab resolved for this host: its render target and the machine config a
backend runs (accelerator, image, NICs); nothing is rendered or started here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvmlab.errors import Problem, SpecError
from kvmlab.fabric.switch import SWITCH_DIR
from kvmlab.guest.image import STANDALONE, GuestImage, build_image
from kvmlab.render import BootImage, Target
from kvmlab.render.devices.control import ControlPart
from kvmlab.render.devices.nic import NicPart
from kvmlab.render.target import Accel
from kvmlab.runtime.guest_kvm import local_kvm
from kvmlab.runtime.hostaccel import HostAccel
from kvmlab.runtime.machine import MachineConfig
from kvmlab.runtime.records import GuestNic
from kvmlab.runtime.rundir import LabDir
from kvmlab.spec import Guest, LoadedLab, TapNic, VhostUserNic
from kvmlab.spec.rules import guest_key


def boot_image(image: GuestImage, guest: Guest, hostname: str) -> BootImage:
    """The render-side description of the default image for one guest."""
    return BootImage(
        kernel=image.kernel,
        initrd=image.initrd,
        append=image.cmdline(hostname=hostname, kvm=guest.nested),
        share=image.share,
        share_tag=image.share_tag,
    )


def make_target(
    loaded: LoadedLab,
    path: tuple[str, ...],
    guest: Guest,
    host: HostAccel,
    run_dir: Path,
    image: GuestImage | None,
) -> Target:
    """Everything the renderers need for one guest of a lab on this host."""
    extra: dict[str, Any] = {"qemu_binary": guest.qemu} if guest.qemu else {}
    switch = loaded.lab.switch
    if switch is not None and len(path) == 1:
        extra.update(
            switch_dir=LabDir.of(loaded.lab.name).root / SWITCH_DIR, switch_kind=switch.kind
        )
    return Target(
        lab=loaded.lab.name,
        address=path,
        lab_dir=loaded.directory,
        run_dir=run_dir,
        auto_accel=host.accel,
        auto_reason=host.reason,
        virt_flag=host.virt_flag,
        image=boot_image(image, guest, path[-1]) if image and guest.boot == "image" else None,
        **extra,
    )


def image_for(guest: Guest, image: GuestImage | None) -> GuestImage | None:
    """The image ``guest`` boots: the self-contained one when it must stay migratable
    (a mounted host share blocks live migration)."""
    if image is not None and guest.migratable and image.share != STANDALONE:
        return build_image(STANDALONE)
    return image


def guest_config(
    loaded: LoadedLab,
    path: tuple[str, ...],
    guest: Guest,
    host: HostAccel,
    run_dir: Path,
    image: GuestImage | None,
) -> MachineConfig:
    """Describe the machine that runs ``guest``: its spec under the accelerator it runs
    with, its target on this host (with the image it boots), and what is recorded of it.
    Nothing is rendered here: the backend renders what it runs (:meth:`Backend.machine`)."""
    if guest.qemu and not Path(guest.qemu).is_file():
        key = f"{guest_key(path)}.qemu"
        raise SpecError([Problem(str(loaded.path), key, f"{guest.qemu} does not exist")])
    target = make_target(loaded, path, guest, host, run_dir, image_for(guest, image))
    accel, reason = target.accel_for(guest)
    runs = guest.under(accel)
    return MachineConfig(
        lab=loaded.lab.name,
        address=path,
        argv=[],
        run_dir=run_dir,
        accel=accel,
        accel_reason=reason,
        vcpus=runs.vcpus,
        memory=runs.memory.size,
        boots_image=runs.boot == "image",
        pinning={int(k): v for k, v in runs.pinning.vcpus.items()},
        emulator_pinning=runs.pinning.emulator,
        children=bool(runs.nested and runs.guests),
        under_kvm=local_kvm() if accel == "kvm" else {},
        migratable=ControlPart(target).probe,
        nics=guest_nics(runs, target, accel),
        guest=runs,
        target=target,
    )


def guest_nics(guest: Guest, target: Target, accel: Accel) -> tuple[GuestNic, ...]:
    """The guest's vhost-user NICs (by socket) and taps (by name), each with its MAC, as
    the renderers give them to it."""
    found = []
    for index, nic in enumerate(guest.nics):
        part = NicPart(nic, index, target, accel)
        if isinstance(nic, VhostUserNic):
            found.append(GuestNic("vhost-user", str(target.vhost_user(nic)[0]), part.mac))
        elif isinstance(nic, TapNic) and part.ifname is not None:
            found.append(GuestNic("tap", part.ifname, part.mac))
    return tuple(found)
