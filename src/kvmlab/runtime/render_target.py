"""What ``kvmlab render`` renders one guest of a lab for: the host it would run on (its
guest hypervisor for a nested guest) and the image it would boot, without starting anything."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.runtime.hostaccel import HostAccel

if TYPE_CHECKING:
    from kvmlab.guest.image import GuestImage
    from kvmlab.render import Target
    from kvmlab.spec import Guest, LoadedLab


def host_of(path: tuple[str, ...], top: HostAccel) -> HostAccel:
    """The accelerator a guest at ``path`` gets: this host's (``top``) at L1, else the KVM
    its guest hypervisor exposes."""
    if len(path) == 1:
        return top
    why = f"runs inside guest hypervisor {path[-2]}, which exposes KVM"
    return HostAccel("kvm", why, "svm" if top.accel == "tcg" else top.virt_flag)


def render_target(
    loaded: LoadedLab,
    path: tuple[str, ...],
    guest: Guest,
    top: HostAccel,
    image: GuestImage | None,
) -> Target:
    """The render target of the guest at ``path``: ``image`` (the newest cached default
    image, or where it will be), or for a migratable guest booting the image its unshared
    kind."""
    from kvmlab.guest.image import latest_cached_image, placeholder_image
    from kvmlab.runtime.lab import make_target
    from kvmlab.runtime.rundir import LabDir

    run_dir = LabDir.of(loaded.lab.name).guest_dir(path)
    shown = image
    if guest.migratable and guest.boot == "image":
        shown = latest_cached_image(share="none") or placeholder_image(share="none")
    return make_target(loaded, path, guest, host_of(path, top), run_dir, shown)
