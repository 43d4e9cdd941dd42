"""Host files a lab names are of the kind they name: a kernel, initrd,
disk image or QEMU binary that exists is a regular file, a vhost-user socket that exists is
a socket; ``/dev/zero`` as a kernel, a directory, a FIFO or a block device as a disk, a
symbolic link to nowhere or a loop of them are refused when the lab loads, one line each,
before anything starts. A file that does not exist yet is left to ``up`` (a disk with a
size is made then; a lab may be checked elsewhere). Only stat is used: nothing is opened.
Nothing boots."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import load_lab

HEAD = 'name = "x"\n[guests.vm]\n'


def problems(tmp_path: Path, body: str) -> list[str]:
    lab = tmp_path / "lab.toml"
    lab.write_text(HEAD + body)
    with pytest.raises(SpecError) as caught:
        load_lab(lab)
    prefix = f"{lab}: "
    assert all(line.startswith(prefix) for line in caught.value.lines())
    return [line.removeprefix(prefix) for line in caught.value.lines()]


def regular(what: str) -> str:
    return f"give the path of {what} (a regular file)"


def test_a_device_or_directory_as_a_kernel_or_initrd(tmp_path: Path) -> None:
    (tmp_path / "boot").mkdir()
    assert problems(tmp_path, 'kernel = "/dev/zero"\ninitrd = "boot"\n') == [
        f"guests.vm.kernel: '/dev/zero' is a character device, not a kernel image: "
        f"{regular('a kernel image')}",
        f"guests.vm.initrd: 'boot' is a directory, not an initial ramdisk: "
        f"{regular('an initial ramdisk')}",
    ]


def test_disks_that_are_not_image_files(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to("/nonexistent/kvmlab-disk")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "file").write_text("")
    disks = ["/tmp", "fifo", "dangling", "loop1", "file/x"]
    listed = ", ".join(f'{{ path = "{d}", size = "1G" }}' for d in disks)
    assert problems(tmp_path, f'boot = "disk"\ndisks = [{listed}]\n') == [
        f"guests.vm.disks[0].path: '/tmp' is a directory, not a disk image: "
        f"{regular('a disk image')}",
        f"guests.vm.disks[1].path: 'fifo' is a named pipe, not a disk image: "
        f"{regular('a disk image')}",
        "guests.vm.disks[2].path: 'dangling' is a symbolic link to '/nonexistent/kvmlab-disk', "
        "which does not exist: give the path of a disk image itself",
        "guests.vm.disks[3].path: 'loop1' is a loop of symbolic links: give the path of a disk "
        "image itself",
        "guests.vm.disks[4].path: 'file/x' goes through a file as if it were a folder: give "
        "the path of a disk image",
    ]


def test_a_block_device_as_a_disk(tmp_path: Path) -> None:
    block = next(
        (
            p
            for p in (Path("/dev") / n for n in ("loop0", "sda", "vda", "nvme0n1"))
            if p.is_block_device()
        ),
        None,
    )
    if block is None:
        pytest.skip("no block device node on this host")
    assert problems(tmp_path, f'disks = [{{ path = "{block}" }}]\n') == [
        f"guests.vm.disks[0].path: '{block}' is a block device; kvmlab attaches disk images "
        "as files (QEMU's 'file' driver, libvirt's type='file'), which a block device is not: "
        "give an image file"
    ]


def test_qemu_and_a_socket_of_the_wrong_kind(tmp_path: Path) -> None:
    (tmp_path / "sock").write_text("")
    body = (
        'qemu = "/usr/bin"\nmemory = { size = "1G", backing = "memfd", shared = true }\n'
        'nics = [{ type = "vhost-user", socket = "sock" }]\n'
    )
    assert problems(tmp_path, body) == [
        f"guests.vm.qemu: '/usr/bin' is a directory, not the QEMU binary: "
        f"{regular('the QEMU binary')}",
        "guests.vm.nics[0].socket: 'sock' is a regular file, not a socket: give the switch's "
        "socket, or remove it so QEMU (in server mode) can make the socket there",
    ]


def test_a_variant_is_checked_too(tmp_path: Path) -> None:
    assert problems(tmp_path, '[variants.v.guests.vm]\nkernel = "/dev/null"\n') == [
        "variants.v.guests.vm.kernel: '/dev/null' is a character device, not a kernel "
        f"image: {regular('a kernel image')}"
    ]


def test_what_exists_as_a_file_or_not_yet_passes(tmp_path: Path) -> None:
    (tmp_path / "vmlinuz").write_text("")
    (tmp_path / "link").symlink_to("vmlinuz")
    lab = tmp_path / "lab.toml"
    lab.write_text(
        HEAD + 'kernel = "link"\ninitrd = "vmlinuz"\n'
        'disks = [{ path = "new/disk.qcow2", size = "1G" }]\n'
        'memory = { size = "1G", backing = "memfd", shared = true }\n'
        'nics = [{ type = "vhost-user", socket = "s.sock" }, '
        '{ type = "vhost-user", socket = "later.sock", mode = "server" }]\n'
    )
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "s.sock"))
        assert load_lab(lab).lab.guests["vm"].kernel == "link"


def test_a_nested_guests_files_are_its_hypervisors(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(
        'name = "x"\n[guests.l1]\nnested = true\nmemory = "2G"\n'
        '[guests.l1.guests.l2]\nboot = "disk"\ndisks = [{ path = "/dev/zero" }]\n'
    )
    assert load_lab(lab).lab.guests["l1"].guests["l2"].disks[0].path == "/dev/zero"


def test_a_name_longer_than_linux_takes_is_refused(tmp_path: Path) -> None:
    long = "d" * 300
    assert problems(tmp_path, f'disks = [{{ path = "/srv/{long}.qcow2" }}]\n') == [
        f"guests.vm.disks[0].path: '/srv/{long[:55]}...' (311 characters) has a name of 306 "
        f"bytes ('{long[:24]}...' (306 characters)); a file or folder name is at most 255 "
        "bytes: shorten it"
    ]
