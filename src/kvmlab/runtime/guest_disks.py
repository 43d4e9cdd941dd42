"""Guest-side disk set-up for the default image: which /dev node is which disk, mounts."""

from __future__ import annotations

from kvmlab.spec import Disk, Guest


def device_of(guest: Guest, index: int) -> str | None:
    """The guest's /dev node for disk ``index`` (virtio-blk disks are vda, vdb... in order)."""
    blk = [i for i, d in enumerate(guest.disks) if d.bus == "virtio-blk"]
    if index not in blk:
        return None
    return "/dev/vd" + chr(ord("a") + blk.index(index))


def scratch_device(guest: Guest) -> str | None:
    """The first raw (unmounted) virtio-blk disk: fio's target inside the guest."""
    for i, disk in enumerate(guest.disks):
        if disk.mount is None and not disk.readonly:
            dev = device_of(guest, i)
            if dev is not None:
                return dev
    return None


def mount_script(guest: Guest) -> list[str] | None:
    """argv that formats (if blank) and mounts every disk with ``mount``, or None."""
    steps = []
    for i, disk in enumerate(guest.disks):
        dev = device_of(guest, i)
        if disk.mount is None or dev is None:
            continue
        steps.append(_mount_step(dev, disk))
    if not steps:
        return None
    load = "{ grep -qw ext4 /proc/filesystems || busybox modprobe ext4 || modprobe ext4; }"
    return ["sh", "-c", " && ".join([load, *steps])]


def _mount_step(dev: str, disk: Disk) -> str:
    return (
        f"{{ blkid {dev} >/dev/null || mkfs.ext4 -q -F {dev}; }} && "
        f"mkdir -p {disk.mount} && mount {dev} {disk.mount}"
    )
