"""The real QEMU accepts every rendered command line and builds the guest the spec describes.

Each guest's argv is started with ``-S`` (no guest code runs) under TCG and inspected
over QMP with qemu.qmp; where the host lacks what a lab needs, the test says why it skips.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from qemu.qmp import ConnectError, QMPClient

from kvmlab.guest.image import build_default_image, build_image
from kvmlab.render import BootImage, render_qemu
from kvmlab.render.devices.disk import SEED_IMAGE
from kvmlab.spec import Guest, TapNic, UserNic, VhostUserNic, load_lab
from kvmlab.spec.machine import HUGEPAGE_BYTES
from tests.conftest import LAB_FILES, target_for

pytestmark = pytest.mark.functional

GUESTS = [
    pytest.param(lab_file, path, id="/".join((lab_file.stem, *path)))
    for lab_file in LAB_FILES
    for path, _ in load_lab(lab_file).lab.walk()
]


def _missing(guest: Guest) -> str | None:
    """Why this host cannot start ``guest``, or None."""
    mem = guest.memory
    if mem.backing == "hugepages":
        kib = HUGEPAGE_BYTES[mem.hugepage_size] // 1024
        free_file = Path(f"/sys/kernel/mm/hugepages/hugepages-{kib}kB/free_hugepages")
        free = int(free_file.read_text()) if free_file.exists() else 0
        need = mem.size // HUGEPAGE_BYTES[mem.hugepage_size]
        if free < need:
            return f"needs {need} free {mem.hugepage_size} huge pages, host has {free}"
    for nic in guest.nics:
        if isinstance(nic, TapNic):
            if not Path("/dev/net/tun").exists() or os.geteuid() != 0:
                return "needs /dev/net/tun and root to create tap devices"
            if nic.type == "vhost-net" and not Path("/dev/vhost-net").exists():
                return "needs /dev/vhost-net (modprobe vhost_net)"
    return None


async def _inspect(sock: Path) -> dict[str, Any]:
    qmp = QMPClient("kvmlab-test")
    # QEMU binds its socket before it listens: on a loaded host a connection in between is
    # refused, so one is retried while the socket is there (QEMU ending fails the test)
    for _ in range(200):
        try:
            await qmp.connect(str(sock))
            break
        except ConnectError:
            if not sock.exists():
                raise
            await asyncio.sleep(0.05)
    else:
        await qmp.connect(str(sock))
    try:
        facts = {
            cmd: await qmp.execute(cmd)
            for cmd in (
                "query-status",
                "query-name",
                "query-cpus-fast",
                "query-memory-size-summary",
                "query-pci",
                "query-block",
                "query-memdev",
            )
        }
        await qmp.execute("quit")
        return facts
    finally:
        with contextlib.suppress(EOFError):  # QEMU closed the socket after 'quit'
            await qmp.disconnect()


def _start(argv: list[str], sock: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(10)
            pytest.fail(f"QEMU did not start (exit {proc.returncode}):\n{log.read_text()}")
        time.sleep(0.05)
    return proc


def _free_forwards(nic: Any) -> Any:
    """A user NIC whose forwards each listen on a port free now (other NICs as they are)."""
    if not isinstance(nic, UserNic) or not nic.forwards:
        return nic
    moved = []
    for fwd in nic.forwards:
        kind = socket.SOCK_DGRAM if fwd.proto == "udp" else socket.SOCK_STREAM
        with socket.socket(socket.AF_INET, kind) as probe:
            probe.bind((str(fwd.host_addr), 0))
            moved.append(fwd.model_copy(update={"host_port": probe.getsockname()[1]}))
    return nic.model_copy(update={"forwards": moved})


def _pci_devices(facts: dict[str, Any], desc: str) -> int:
    return sum(
        1
        for bus in facts["query-pci"]
        for dev in bus["devices"]
        if dev["class_info"].get("desc") == desc
    )


@pytest.mark.parametrize(("lab_file", "path"), GUESTS)
def test_qemu_builds_the_spec(lab_file: Path, path: tuple[str, ...], tmp_path: Path) -> None:
    loaded = load_lab(lab_file)
    guest = loaded.lab.find("/".join(path))
    assert guest is not None
    peerless = [n for n in guest.nics if not isinstance(n, VhostUserNic)]
    if len(peerless) < len(guest.nics):
        # QEMU waits at start for the peer of a vhost-user NIC, client or server mode alike;
        # the net tests run those with dpdk-testpmd. The rest of the guest is checked here.
        guest = guest.model_copy(update={"nics": peerless})
    # A lab's forwards bind fixed host ports (basic's 2222, migrate's 2230) that the main
    # lane's tests of the same labs hold meanwhile: each takes a free port here (the rule is
    # what QEMU checks, not the number).
    guest = guest.model_copy(update={"nics": [_free_forwards(n) for n in guest.nics]})
    if guest.accel == "kvm":
        # Forced KVM (an L2 inside its guest hypervisor): the devices are what is checked
        # here, under TCG like every other guest; a KVM-less host could not start it.
        guest = guest.model_copy(update={"accel": "auto"})
    why = _missing(guest)
    if why:
        pytest.skip(why)
    # Absolute image paths belong inside a guest hypervisor: keep this test in tmp_path.
    disks = [d.model_copy(update={"path": d.path.lstrip("/")}) for d in guest.disks]
    guest = guest.model_copy(update={"disks": disks})
    for disk in guest.disks:
        image = tmp_path / disk.path
        image.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", disk.format, str(image), "64M"],
            check=True,
            timeout=30,
        )
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    if guest.cloud_init is not None:
        (run_dir / SEED_IMAGE).write_bytes(bytes(1024 * 1024))
    built = build_image("none") if guest.migratable else build_default_image()
    boot = BootImage(built.kernel, built.initrd, built.append, built.share, built.share_tag)
    target = target_for(loaded, path, "tcg", run_dir=run_dir, lab_dir=tmp_path, image=boot)
    argv = [*render_qemu(guest, target).argv, "-S"]
    if any(isinstance(n, TapNic) for n in guest.nics):
        argv = [shutil.which("unshare") or "unshare", "--net", "--", *argv]
    proc = _start(argv, run_dir / "qmp.sock", tmp_path / "qemu.log")
    try:
        # QEMU writes its pidfile after the QMP socket: waited for while it runs (a loaded
        # host is slow, not wrong), within a bound only for a QEMU that hangs
        deadline = time.monotonic() + 300
        while not (run_dir / "qemu.pid").exists() and time.monotonic() < deadline:
            if proc.poll() is not None:
                log = (tmp_path / "qemu.log").read_text()
                pytest.fail(f"QEMU exited ({proc.returncode}):\n{log}")
            time.sleep(0.02)
        pid = (run_dir / "qemu.pid").read_text().strip()
        assert pid == str(proc.pid) or argv[0] != target.qemu_binary
        facts = asyncio.run(asyncio.wait_for(_inspect(run_dir / "qmp.sock"), 30))
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert facts["query-status"]["status"] == "prelaunch"
    assert facts["query-name"]["name"] == target.name
    running = guest.under("tcg")  # its when_tcg overrides (nested/l1: one vCPU)
    assert len(facts["query-cpus-fast"]) == running.vcpus
    assert facts["query-memory-size-summary"]["base-memory"] == running.memory.size
    assert _pci_devices(facts, "Ethernet controller") == len(guest.nics)
    attached = [b for b in facts["query-block"] if b.get("inserted")]
    seeds = 1 if guest.cloud_init is not None else 0
    assert len(attached) == len(guest.disks) + seeds
    for block, disk in zip(attached, guest.disks, strict=False):
        assert block["inserted"]["file"].endswith(disk.path)
        assert block["inserted"]["ro"] == disk.readonly
    if guest.memory.numa:
        sizes = sorted(m["size"] for m in facts["query-memdev"])
        assert sizes == sorted(c.memory for c in guest.memory.numa)
