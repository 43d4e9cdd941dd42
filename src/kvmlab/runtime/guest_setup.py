"""A guest's own set-up around its boot: its disk images created before, and after boot
what the default image does not do itself (mounts, cloud-init, addresses, background
commands), each a script run through its agent under the ``setup`` limit."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kvmlab.errors import Problem, ProcessFailure, RuntimeFailure, SpecError
from kvmlab.guest.errors import GuestExecTimeout
from kvmlab.runtime.background import start_background
from kvmlab.runtime.guest_disks import mount_script
from kvmlab.runtime.guest_network import address_script, lab_addresses, setup_script, user_net
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.waits import LIMITS
from kvmlab.spec import Guest, Lab, LoadedLab
from kvmlab.spec.rules import guest_key


def ensure_disks(loaded: LoadedLab, path: tuple[str, ...], guest: Guest) -> None:
    """Create missing disk images that have a size; a missing one without a size is an error."""
    for i, disk in enumerate(guest.disks):
        file = Path(disk.path) if Path(disk.path).is_absolute() else loaded.directory / disk.path
        if file.exists():
            continue
        if disk.size is None:
            key = f"{guest_key(path)}.disks[{i}].path"
            raise SpecError([Problem(str(loaded.path), key, f"{file} does not exist; set size")])
        file.parent.mkdir(parents=True, exist_ok=True)
        argv = ["qemu-img", "create", "-q", "-f", disk.format, str(file), str(disk.size)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise ProcessFailure(
                f"cannot create {file}", argv, proc.returncode, proc.stderr.splitlines()[-5:]
            )


def prepare_guest(machine: Machine, lab: Lab, path: tuple[str, ...], guest: Guest) -> None:
    """After boot, what the default image does not do itself: mounts, user networking, the
    addresses (and channels) of NICs on the lab's networks."""
    mounts = mount_script(guest) if guest.boot == "image" else None
    if mounts is not None:
        _setup(machine, mounts, "mounting its disks")
    if guest.cloud_init is not None:
        # The agent starts before cloud-init's later stages: wait until it has finished.
        done = machine.exec(["cloud-init", "status", "--wait"], timeout=600)
        if done.returncode not in (0, 2):  # 2: finished with recoverable errors
            raise RuntimeFailure(
                f"{machine.config.name}: cloud-init failed: "
                f"{(done.stdout + done.stderr).decode(errors='replace').strip()[-500:]}"
            )
    net = user_net(lab.name, path, guest) if guest.boot == "image" else None
    if net is not None:
        _setup(machine, setup_script(net), "network set-up")
    if len(path) == 1 and (own := lab_addresses(lab, path, guest)):
        _setup(machine, address_script(own), "addresses on the lab's networks")
    if guest.background:
        start_background(machine, guest.background)


def _setup(machine: Machine, argv: list[str], what: str) -> None:
    """Run a set-up command in the guest, bounded by the ``setup`` limit at its speed."""
    limit = LIMITS["setup"]
    timeout = limit.value("ceiling", machine.level_factor())
    try:
        result = machine.exec(argv, timeout=timeout)
    except GuestExecTimeout as exc:
        raise limit.exceeded(f"{machine.config.name}: {what}", timeout, str(exc)) from None
    if result.returncode != 0:
        why = result.stderr.decode(errors="replace").strip()
        raise RuntimeFailure(f"{machine.config.name}: {what} failed: {why}")
