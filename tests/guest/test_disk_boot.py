"""``boot = "disk"`` with a cloud-init seed: the test image's MBR, and a real boot via the CLI.

The functional test builds (or takes from the cache) kvmlab's Debian 12 test image, boots
it under the real ``kvmlab up`` and checks, through ``kvmlab exec``, what the seed asked
cloud-init to do. Measured here (TCG, 2 host cores): the test takes ~75 s with the image
cached (up to the agent ~40 s, cloud-init done ~20 s later, down ~5 s) and ~2 min with a
fresh cache (the image build is ~60 s).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.errors import KvmlabError
from kvmlab.guest.diskimage import Partition, build_test_disk_image, mbr
from kvmlab.guest.errors import ImageError
from kvmlab.guest.kernel import default_cache_dir
from tests.runtime.conftest import pids_mentioning

KVMLAB = Path(sys.executable).parent / "kvmlab"
LAB = "disk-boot-test"
PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDiskBootTestKey test@kvmlab"


def test_mbr_has_boot_code_signature_and_partitions() -> None:
    parts = [Partition(2048, 131072, 0x0C, active=True), Partition(133120, 6291456, 0x83)]
    sector = mbr(b"\xfa" * 440, parts, 0x6B766D6C)
    assert len(sector) == 512
    assert sector[:440] == b"\xfa" * 440
    assert struct.unpack_from("<I", sector, 440)[0] == 0x6B766D6C
    assert sector[510:] == b"\x55\xaa"
    entries = [struct.unpack_from("<B3sB3sII", sector, 446 + 16 * i) for i in range(4)]
    assert [(e[0], e[2], e[4], e[5]) for e in entries] == [
        (0x80, 0x0C, 2048, 131072),
        (0x00, 0x83, 133120, 6291456),
        (0, 0, 0, 0),
        (0, 0, 0, 0),
    ]


def test_mbr_refuses_what_does_not_fit() -> None:
    with pytest.raises(ImageError, match="440"):
        mbr(b"\0" * 441, [], 0)
    with pytest.raises(ImageError, match="4 primary"):
        mbr(b"", [Partition(1, 1, 0x83)] * 5, 0)


@pytest.fixture
def run_root() -> Iterator[Path]:
    """A short run root (unix socket paths are limited to 107 bytes); no QEMU may outlive it."""
    root = Path(tempfile.mkdtemp(prefix="kvmlab-disk-"))
    try:
        yield root
    finally:
        for pid in pids_mentioning(str(root)):  # only if the test failed before `kvmlab down`
            os.kill(pid, 9)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.functional
def test_disk_image_boots_with_the_cloud_init_seed(tmp_path: Path, run_root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("building the test disk image needs root")
    t0 = time.monotonic()
    disk = build_test_disk_image(tmp_path / "vm.qcow2")
    built = time.monotonic() - t0
    lab = tmp_path / "lab.toml"
    lab.write_text(f"""\
name = "{LAB}"
[guests.vm]
vcpus = 2
memory = "1G"
boot = "disk"
cloud_init = {{}}
[[guests.vm.disks]]
path = "{disk}"
[[guests.vm.nics]]
type = "user"
""")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(PUBKEY + "\n")
    env = {k: v for k, v in os.environ.items() if k != "SUDO_USER"}
    env |= {
        "KVMLAB_RUN_DIR": str(run_root),
        "HOME": str(home),
        "KVMLAB_CACHE": str(default_cache_dir()),
    }

    def kvmlab(*args: str, timeout: float = 120, check: bool = True) -> str:
        proc = subprocess.run(
            [str(KVMLAB), *args], env=env, capture_output=True, text=True, timeout=timeout
        )
        if check:
            assert proc.returncode == 0, f"kvmlab {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    def guest(*argv: str, timeout: float = 120) -> str:
        return kvmlab(
            "exec", f"{LAB}/vm", "--timeout", str(timeout), "--", *argv, timeout=timeout + 30
        )

    up = False
    try:
        t1 = time.monotonic()
        kvmlab("up", str(lab), timeout=400)
        up = True
        booted = time.monotonic() - t1
        assert guest("cat", "/etc/hostname").strip() == "vm"
        assert guest("id", "-un", "kvmlab").strip() == "kvmlab"
        status = guest("cloud-init", "status", "--wait", "--long", timeout=300)
        settled = time.monotonic() - t1
        assert "status: done" in status, status
        assert "Valid cloud-config" in guest("cloud-init", "schema", "--system")
        assert guest("cat", "/home/kvmlab/.ssh/authorized_keys").splitlines()[-1] == PUBKEY
        assert guest("passwd", "--status", "kvmlab").split()[1] == "L"  # locked password
        assert guest("sudo", "-n", "-u", "kvmlab", "sudo", "-n", "id", "-u").strip() == "0"
        assert guest("systemctl", "is-active", "qemu-guest-agent").strip() == "active"
        t2 = time.monotonic()
        kvmlab("down", LAB, timeout=120)
        up = False
        stopped = time.monotonic() - t2
    finally:
        serial = run_root / LAB / "vm" / "serial.log"
        if serial.exists():  # kept for a failed run; `down` removes the run directory
            shutil.copy(serial, tmp_path / "serial.log")
        if up:
            kvmlab("down", "--force", LAB, check=False)
    assert pids_mentioning(str(run_root)) == []
    assert not (run_root / LAB).exists()
    print(
        f"disk boot: image {built:.1f} s, up to agent {booted:.1f} s, "
        f"cloud-init done {settled:.1f} s, down {stopped:.1f} s"
    )


def test_building_needs_root_or_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(KvmlabError, match="needs root"):
        build_test_disk_image(tmp_path / "vm.qcow2", cache_dir=tmp_path / "cache")
    assert list(tmp_path.iterdir()) == []
