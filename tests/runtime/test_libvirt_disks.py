"""Disks libvirt's QEMU user must reach: the image and every backing file under it; the
cloud-init seed rendered from where kvmlab uploaded it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.runtime.libvirt.backend import _check_disk, backing_chain
from kvmlab.runtime.libvirt.conn import LibvirtFailure
from kvmlab.runtime.libvirt.publish import VOLUME

QEMU_USER = (64055, 64055)  # libvirt-qemu's ids on Debian; any non-owner does


def qcow2(path: Path, backing: Path | None = None) -> Path:
    argv = ["qemu-img", "create", "-q", "-f", "qcow2"]
    argv += ["-F", "qcow2", "-b", str(backing)] if backing else []
    subprocess.run([*argv, str(path), "16M"], check=True)
    return path


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    """A closed and an open directory in one every user may enter (pytest's are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="kvmlab-disks-"))
    try:
        root.chmod(0o755)
        closed, opened = root / "closed", root / "open"
        closed.mkdir(mode=0o700)
        opened.mkdir(mode=0o755)
        yield closed, opened
    finally:
        shutil.rmtree(root)


def test_the_chain_lists_the_image_then_its_backing_files(dirs: tuple[Path, Path]) -> None:
    closed, opened = dirs
    base = qcow2(closed / "base.qcow2")
    top = qcow2(opened / "top.qcow2", base)
    assert backing_chain(top, "qcow2") == [top, base]
    assert backing_chain(opened / "missing.qcow2", "qcow2") == [opened / "missing.qcow2"]


def test_a_raw_disk_is_never_probed_for_a_backing_file(dirs: tuple[Path, Path]) -> None:
    """A guest writes what it likes into its raw disk, a qcow2 header naming a host file
    included: read as the lab declares it, that is never followed."""
    _, opened = dirs
    fake = opened / "raw.img"  # a raw disk holding a qcow2 header
    subprocess.run(
        [
            "qemu-img",
            "create",
            "-q",
            "-f",
            "qcow2",
            "-u",
            "-F",
            "raw",
            "-b",
            "/etc/hostname",
            str(fake),
            "16M",
        ],
        check=True,
    )
    assert backing_chain(fake, "qcow2")[-1] == Path("/etc/hostname")  # what probing follows
    assert backing_chain(fake, "raw") == [fake]
    _check_disk(0, fake, "raw", QEMU_USER, "qemu:///system", "lab/vm")


def test_a_backing_file_out_of_reach_is_refused_with_the_standalone_fix(
    dirs: tuple[Path, Path],
) -> None:
    closed, opened = dirs
    top = qcow2(opened / "top.qcow2", qcow2(closed / "base.qcow2"))
    with pytest.raises(LibvirtFailure) as err:
        _check_disk(0, top, "qcow2", QEMU_USER, "qemu:///system", "lab/vm")
    text = str(err.value)
    assert f"backing file {closed / 'base.qcow2'}" in text and "closed to uid 64055" in text
    assert "qemu-img convert -f qcow2 -O qcow2" in " ".join(err.value.fix)
    _check_disk(0, qcow2(opened / "alone.qcow2"), "qcow2", QEMU_USER, "qemu:///system", "lab/vm")


def test_a_disk_in_a_closed_directory_names_the_directory(dirs: tuple[Path, Path]) -> None:
    closed, _ = dirs
    with pytest.raises(LibvirtFailure, match="closed to uid 64055") as err:
        _check_disk(1, qcow2(closed / "d.qcow2"), "qcow2", QEMU_USER, "qemu:///system", "lab/vm")
    assert "backing file" not in str(err.value)


def test_seed_volumes_are_kvmlab_s_to_delete_and_nothing_else_is() -> None:
    assert VOLUME.match("0123456789abcdef01234567-cidata.img")
    assert VOLUME.match("0123456789abcdef01234567-kernel")
    assert not VOLUME.match("0123456789abcdef01234567-disk.qcow2")
    # a migration's copies of a domain's disks, by its token and the disk's target
    assert VOLUME.match("0123456789abcdef01234567-vda.qcow2")
    assert VOLUME.match("0123456789abcdef01234567-sdb.raw")
    assert not VOLUME.match("0123456789abcdef01234567-vda.img")
    assert not VOLUME.match("0123456789abcdef01234567-../vda.raw")
    assert not VOLUME.match("users-cidata.img")
