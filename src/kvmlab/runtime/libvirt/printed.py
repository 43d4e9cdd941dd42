"""What a domain printed by ``kvmlab render -o libvirt`` needs from its host to start as
printed (image, seed, disks, sockets, taps, huge pages, CPUs): one :class:`Finding` each, printed
on stderr by the CLI; ``kvmlab up --backend libvirt`` or ``render --publish`` provides it."""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from kvmlab.render.libvirt_caps import IMAGE_POOL_DIR, LibvirtCaps
from kvmlab.render.target import Target
from kvmlab.runtime.libvirt.backend import backing_chain, why_unreachable
from kvmlab.spec import Guest, TapNic, VhostUserNic
from kvmlab.spec.units import format_size

DEFAULT_QEMU_USER = "libvirt-qemu"
"""The account Debian's libvirt runs QEMU as (``user`` in ``qemu.conf``)."""


@dataclass(frozen=True)
class Finding:
    """One thing the printed domain needs: ``blocks`` when it will not start without it."""

    blocks: bool
    text: str

    def line(self, guest: str) -> str:
        """The stderr line for guest address ``guest``."""
        kind = "will not start as printed" if self.blocks else "note"
        return f"kvmlab: render {guest}: {kind}: {self.text}"


def qemu_user(caps: LibvirtCaps) -> tuple[int, int] | None:
    """The uid and gid the daemon runs QEMU as: asked of it, or (no daemon asked) the
    installed libvirt's default account, when this host has one."""
    if caps.qemu_user is not None:
        return caps.qemu_user
    try:
        entry = pwd.getpwnam(DEFAULT_QEMU_USER)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _publish_hint(connect: str | None, lab: str, guest: str) -> str:
    uri = connect or "URI"
    return (
        f"kvmlab render {lab} --guest {guest} -o libvirt --connect {uri} "
        "--publish uploads it into libvirt's pool 'kvmlab' and prints the domain "
        "pointing there"
    )


def findings(
    guest: Guest,
    target: Target,
    caps: LibvirtCaps,
    *,
    local: bool,
    connect: str | None,
    lab_file: str,
) -> list[Finding]:
    """What the domain rendered from ``guest``/``target`` needs on a daemon of this host
    (``local``); a remote daemon's files cannot be checked from here."""
    name = "/".join(target.address)
    if len(target.address) > 1:
        return [
            Finding(
                True,
                f"it runs inside guest hypervisor {target.address[-2]}: the "
                "domain is for the libvirt inside that guest, not this host's "
                "(kvmlab up starts it there)",
            )
        ]
    out: list[Finding] = []
    user = qemu_user(caps)
    out.extend(_image(guest, target, user, local, connect, lab_file, name))
    if local:
        out.extend(_disks(guest, target, user))
        out.extend(_nics(guest, target))
        out.extend(_memory(guest))
        out.extend(_pinning(guest))
    elif target.image is None or not _published(target.image.kernel):
        out.append(
            Finding(
                False,
                f"{connect} is another host's daemon: the files the "
                "domain names are not checked from here",
            )
        )
    if guest.cloud_init is not None and target.seed_image is None:
        out.append(
            Finding(
                True,
                "its cloud-init seed is written and uploaded by kvmlab up "
                f"or by --publish: {_publish_hint(connect, lab_file, name)}",
            )
        )
    return out


def _published(path: Path) -> bool:
    return str(path).startswith(IMAGE_POOL_DIR + "/")


def _image(
    guest: Guest,
    target: Target,
    user: tuple[int, int] | None,
    local: bool,
    connect: str | None,
    lab_file: str,
    name: str,
) -> list[Finding]:
    image = target.image
    if guest.boot != "image" or image is None:
        return []
    out: list[Finding] = []
    if not _published(image.kernel):
        if not image.kernel.exists():
            out.append(Finding(True, "the default image is not built yet: kvmlab image builds it"))
        elif local and user is not None:
            for file in (image.kernel, image.initrd):
                why = why_unreachable(file, *user)
                if why:
                    out.append(
                        Finding(
                            True,
                            f"libvirt's QEMU user (uid {user[0]}) cannot "
                            f"read {file}: {why}; "
                            f"{_publish_hint(connect, lab_file, name)}",
                        )
                    )
                    break
    if image.share != "none":
        who = (
            "root: it reads every file of the host"
            if user is not None and user[0] == 0
            else f"uid {user[0]}"
            if user is not None
            else "the daemon's QEMU user"
        )
        out.append(
            Finding(
                False,
                f"the guest reads the host's root read-only over "
                f"{image.share} as {who} (not through kvmlab's masked host view, "
                "which only the qemu backend builds)",
            )
        )
    return out


def _disks(guest: Guest, target: Target, user: tuple[int, int] | None) -> list[Finding]:
    out: list[Finding] = []
    for i, disk in enumerate(guest.disks):
        path = target.path(disk.path)
        if not path.exists():
            size = f" {format_size(disk.size)}" if disk.size else " SIZE"
            out.append(
                Finding(
                    True,
                    f"disks[{i}] {path} does not exist: create it "
                    f"(qemu-img create -f {disk.format} {path}{size}); "
                    "kvmlab up creates scratch disks itself",
                )
            )
            continue
        if user is None:
            continue
        for n, file in enumerate(backing_chain(path, disk.format)):
            why = why_unreachable(file, *user)
            if why:
                what = f"disks[{i}] {path}" + (f", backing file {file}" if n else "")
                out.append(
                    Finding(
                        True,
                        f"libvirt's QEMU user (uid {user[0]}) cannot reach "
                        f"{what}: {why}; put it under a directory every user "
                        "may enter",
                    )
                )
                break
    return out


def _nics(guest: Guest, target: Target) -> list[Finding]:
    out: list[Finding] = []
    for i, nic in enumerate(guest.nics):
        if isinstance(nic, VhostUserNic):
            sock, mode, _ = target.vhost_user(nic)
            if mode == "client" and not _is_socket(sock):
                out.append(
                    Finding(
                        True,
                        f"nics[{i}] connects to vhost-user socket {sock}, "
                        "which nothing serves, and QEMU waits at start until "
                        "something does (kvmlab up starts the lab's switch; "
                        "render starts nothing)",
                    )
                )
            elif mode == "server":
                out.append(
                    Finding(
                        True,
                        f"nics[{i}] serves vhost-user socket {sock}, and "
                        "QEMU waits at start until a switch connects to it "
                        "(kvmlab up starts the lab's switch; render starts "
                        "nothing)",
                    )
                )
        elif isinstance(nic, TapNic):
            if nic.type == "vhost-net" and not Path("/dev/vhost-net").exists():
                out.append(
                    Finding(
                        True,
                        f"nics[{i}] is vhost-net and this host has no "
                        "/dev/vhost-net (modprobe vhost_net)",
                    )
                )
            if nic.network is not None:
                out.append(
                    Finding(
                        False,
                        f"nics[{i}] joins lab network {nic.network} only "
                        "under kvmlab up; as printed, libvirt makes its tap in the "
                        "host's namespace, on no bridge",
                    )
                )
            elif nic.ifname and nic.ifname not in _interfaces():
                mq = " multi_queue" if nic.queues > 1 else ""
                out.append(
                    Finding(
                        True,
                        f"nics[{i}] takes the user's tap {nic.ifname}, which "
                        f"does not exist: ip tuntap add dev {nic.ifname} mode "
                        f"tap{mq}",
                    )
                )
    return out


def _memory(guest: Guest) -> list[Finding]:
    memory = guest.memory
    if memory.backing != "hugepages":
        return []
    size_kb = {"2M": 2048, "1G": 1048576}.get(memory.hugepage_size)
    if size_kb is None:
        return []
    pool = Path(f"/sys/kernel/mm/hugepages/hugepages-{size_kb}kB/free_hugepages")
    try:
        free = int(pool.read_text())
    except (OSError, ValueError):
        free = 0
    need = -(-memory.size // (size_kb * 1024))
    if free >= need:
        return []
    return [
        Finding(
            True,
            f"its memory is backed by {memory.hugepage_size} huge pages: it "
            f"needs {need} free, this host has {free} (reserve them first, e.g. "
            f"echo {need} > /sys/kernel/mm/hugepages/hugepages-{size_kb}kB/"
            "nr_hugepages)",
        )
    ]


def _pinning(guest: Guest) -> list[Finding]:
    have = os.cpu_count() or 1
    wanted: set[int] = set()
    for cpus in guest.pinning.vcpus.values():
        wanted.update(cpus)
    if guest.pinning.emulator is not None:
        wanted.update(guest.pinning.emulator)
    missing = sorted(c for c in wanted if c >= have)
    if not missing:
        return []
    return [
        Finding(
            True, f"it pins to host CPU {missing[0]}, and this host has {have} (CPUs 0-{have - 1})"
        )
    ]


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.lstat().st_mode)
    except OSError:
        return False


def _interfaces() -> set[str]:
    try:
        return {p.name for p in Path("/sys/class/net").iterdir()}
    except OSError:
        return set()
