"""The guest cannot tell which backend ran it, asked inside the guest: one guest booted by
kvmlab's QEMU and then by a libvirtd reads its PCI tree (address, vendor, device, class),
its NICs in order with their MACs and slots, its CPU topology, its memory and its disks,
and both readings are the same. The guest has what makes the backends differ when nothing
is spelt out: a user NIC with a port forward (through qemu:commandline on a libvirt
without passt) beside an e1000e, a virtio-blk and a virtio-scsi disk, the host share and the
agent channel, and vCPUs without a topology. Before kvmlab placed every device
(kvmlab.render.devices.slots), libvirt's guest had six PCIe root ports, a USB controller,
modern-only virtio IDs, its NICs at other slots and 4 kB less memory."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.libvirt_backend.conftest import Daemon

pytestmark = pytest.mark.functional

LAB = """
name = "seen"
description = "One guest, to be read from inside under either backend"

[guests.vm]
vcpus = 2
memory = "512M"

[[guests.vm.nics]]
type = "user"
forwards = [{{ host_port = {port}, guest_port = 22 }}]

[[guests.vm.nics]]
type = "user"
model = "e1000e"

[[guests.vm.disks]]
path = "disks/blk.qcow2"
size = "1G"

[[guests.vm.disks]]
path = "disks/scsi.qcow2"
size = "1G"
bus = "virtio-scsi"
"""

READ = r"""
for d in /sys/bus/pci/devices/*; do
  read -r v <$d/vendor; read -r i <$d/device; read -r c <$d/class
  echo "pci ${d##*/} $v $i $c"
done
for n in /sys/class/net/*; do
  [ -e $n/device ] || continue
  read -r m <$n/address; p=$(readlink -f $n/device)
  case ${p##*/} in virtio*) p=${p%/*} ;; esac
  echo "net ${n##*/} $m ${p##*/}"
done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
  read -r s <$c/topology/physical_package_id; read -r k <$c/topology/core_id
  echo "cpu ${c##*/} socket=$s core=$k"
done
grep MemTotal /proc/meminfo
for b in /sys/block/*; do
  [ -e $b/device ] || continue
  read -r z <$b/size; echo "block ${b##*/} $z"
done
cat /sys/class/virtio-ports/*/name
ls /sys/class/scsi_disk
for v in /sys/block/*/device/vpd_pg83; do
  echo "vpd ${v#/sys/block/} $(od -An -tx1 $v | tr -d ' \n')"
done
for f in /sys/class/dmi/id/*; do [ -f $f ] && read -r x <$f && echo "dmi ${f##*/} $x"; done
cat /proc/cmdline
"""
"""What the guest reads of itself (busybox sh; a virtio NIC's PCI device is its parent)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def seen_lab() -> Iterator[Path]:
    """The lab in a directory libvirt's QEMU user may enter (its disks are made beside it)."""
    where = Path(tempfile.mkdtemp(prefix="kvmlab-seen-", dir="/var/tmp"))
    try:
        where.chmod(0o711)
        (where / "seen.toml").write_text(LAB.format(port=_free_port()))
        yield where / "seen.toml"
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _read_inside(env: dict[str, str], lab: Path, *backend: str) -> str:
    up = cli(env, "up", str(lab), *backend, timeout=900)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        read = cli(env, "exec", "seen/vm", "--", "sh", "-c", READ)
        assert read.returncode == 0, read.stderr
        return read.stdout
    finally:
        down = cli(env, "down", "seen", timeout=300)
        assert down.returncode == 0, down.stderr


def test_the_guest_reads_the_same_machine_under_either_backend(
    libvirtd: Daemon, seen_lab: Path
) -> None:
    under_qemu = _read_inside(libvirtd.env, seen_lab, "--backend", "qemu")
    under_libvirt = _read_inside(
        libvirtd.env, seen_lab, "--backend", "libvirt", "--connect", libvirtd.uri
    )
    lines = under_qemu.splitlines()
    # what the reading must hold for the comparison to mean anything
    nics = [line.split() for line in lines if line.startswith("net ")]
    assert [n[3] for n in nics] == ["0000:00:04.0", "0000:00:05.0"], under_qemu  # lab order
    assert sum(line.startswith("cpu ") for line in lines) == 2
    assert sum(line.startswith("block ") for line in lines) == 2
    assert "org.qemu.guest_agent.0" in lines
    assert under_libvirt == under_qemu
