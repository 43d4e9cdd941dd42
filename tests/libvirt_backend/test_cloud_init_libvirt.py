"""A cloud image booted from its disk through a real private libvirtd, with the cloud-init
seed kvmlab writes and uploads for the domain (the ``cloud-disk`` lab's path).

Measured here (TCG, 2 host cores, test image cached): up to the agent ~45 s, cloud-init
done ~20 s later; the whole test 61 s.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kvmlab.guest.diskimage import build_test_disk_image
from kvmlab.guest.kernel import default_cache_dir
from tests.conftest import cli
from tests.libvirt_backend.conftest import Daemon

pytestmark = pytest.mark.functional

PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILibvirtCloudInitTestKey test@kvmlab"
LAB = """\
name = "lvci"
[guests.vm]
vcpus = 2
memory = "1G"
boot = "disk"
cloud_init = { user = "lab" }
[[guests.vm.disks]]
path = "DISK"
[[guests.vm.nics]]
type = "user"
"""


def _no_leftovers(uri: str) -> None:
    import libvirt

    conn = libvirt.open(uri)
    try:
        assert conn.listAllDomains(0) == [], "a domain was left"
        assert conn.listAllStoragePools(0) == [], "kvmlab's pool (or a seed in it) was left"
    finally:
        conn.close()


def test_cloud_image_boots_with_its_seed_through_libvirt(
    libvirtd: Daemon, open_dir: Path, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("building the test disk image needs root")
    overlay = build_test_disk_image(open_dir / "overlay.qcow2")  # backing file in root's cache
    lab = open_dir / "lab.toml"
    lab.write_text(LAB.replace("DISK", overlay.name))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(PUBKEY + "\n")
    env = {k: v for k, v in libvirtd.env.items() if k != "SUDO_USER"}
    env |= {"HOME": str(home), "KVMLAB_CACHE": str(default_cache_dir())}
    up = ["up", str(lab), "--backend", "libvirt", "--connect", libvirtd.uri]

    refused = cli(env, *up, timeout=120)  # the backing file is under /root: unreachable
    assert refused.returncode == 3, refused.stderr
    assert "backing file" in refused.stderr and "qemu-img convert" in refused.stderr
    _no_leftovers(libvirtd.uri)

    standalone = open_dir / "disk.qcow2"
    subprocess.run(
        ["qemu-img", "convert", "-O", "qcow2", str(overlay), str(standalone)],
        check=True,
        timeout=300,
    )
    lab.write_text(LAB.replace("DISK", standalone.name))
    started = cli(env, *up, timeout=900)
    try:
        assert started.returncode == 0, started.stderr[-3000:]

        def guest(*argv: str) -> str:
            ran = cli(env, "exec", "lvci/vm", "--timeout", "300", "--", *argv, timeout=330)
            assert ran.returncode == 0, f"{argv}: {ran.stderr}"
            return ran.stdout

        assert guest("cat", "/etc/hostname").strip() == "vm"
        assert "status: done" in guest("cloud-init", "status", "--long")
        assert guest("cat", "/home/lab/.ssh/authorized_keys").splitlines()[-1] == PUBKEY
        assert guest("sudo", "-n", "-u", "lab", "sudo", "-n", "id", "-u").strip() == "0"
        seed = guest("sh", "-c", "blkid -L cidata").strip()  # the uploaded seed, attached
        assert seed.startswith("/dev/vd"), seed
    finally:
        down = cli(env, "down", "lvci", timeout=300)
    assert down.returncode == 0, down.stderr
    _no_leftovers(libvirtd.uri)
    assert not (libvirtd.root / "lvci").exists()
