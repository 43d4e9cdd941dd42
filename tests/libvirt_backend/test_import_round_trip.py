"""``kvmlab import`` of domains kvmlab did not write, checked with libvirt's own tools on
both sides: each write-up's domain (virt-install's XML, the DPDK write-up's with its
hand-added vhost-user NICs and huge pages) is defined on a private libvirtd with ``virsh
define``, imported by name (``kvmlab import domain:NAME -c URI``), and the lab's libvirt
rendering is run through ``virsh domxml-to-native qemu-argv`` beside the original's: both
command lines import to the same guest, but for what the import says it changed. An
imported lab boots (``kvmlab up``) with kvmlab's image."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kvmlab.spec.importing import from_qemu_argv
from tests.conftest import cli
from tests.libvirt_backend.conftest import Daemon

pytestmark = pytest.mark.functional

DATA = Path(__file__).resolve().parents[1] / "spec" / "data" / "import"
NATIVE = ("nested-l1", "windows-clock")
"""The domains libvirt converts to a command line here (the DPDK one needs hugetlbfs)."""


def _virsh(uri: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["virsh", "-c", uri, *args], capture_output=True, text=True, input=stdin, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _domain(name: str, where: Path) -> str:
    """The recorded domain XML with its disk moved to an image that exists in ``where``."""
    xml = (DATA / f"{name}.xml").read_text()
    for line in xml.splitlines():
        if "<source file=" in line:
            path = line.split('"')[1]
            local = where / Path(path).name
            subprocess.run(
                ["qemu-img", "create", "-q", "-f", "qcow2", str(local), "1G"], check=True
            )
            xml = xml.replace(path, str(local))
    return xml


def _native(uri: str, xml_file: Path) -> dict[str, Any]:
    argv = _virsh(uri, "domxml-to-native", "qemu-argv", str(xml_file))
    guest = from_qemu_argv(argv, xml_file.name).guest
    for nic in guest.get("nics", []):
        nic.pop("network", None)
    return guest


@pytest.mark.parametrize("name", NATIVE)
def test_a_defined_domain_imports_to_a_lab_libvirt_renders_back_the_same(
    libvirtd: Daemon, open_dir: Path, name: str
) -> None:
    if shutil.which("virsh") is None:
        pytest.skip("virsh is not installed (make deps installs it)")
    original = open_dir / f"{name}.xml"
    original.write_text(_domain(name, open_dir))
    domain = _virsh(libvirtd.uri, "define", str(original)).split()[1].strip("'")
    try:
        lab = open_dir / f"{name}.toml"
        made = cli(
            libvirtd.env, "import", f"domain:{domain}", "-c", libvirtd.uri, "--out", str(lab)
        )
        assert made.returncode == 0, made.stderr
        assert "kvmlab: import: not carried over: " in made.stderr  # said, not only written
        checked = cli(libvirtd.env, "check", str(lab))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        rendered = cli(libvirtd.env, "render", str(lab), "-o", "libvirt")
        assert rendered.returncode == 0, rendered.stderr
        back = open_dir / f"{name}.kvmlab.xml"
        back.write_text(rendered.stdout)
        expected, got = _native(libvirtd.uri, original), _native(libvirtd.uri, back)
        if got.get("accel") == "tcg":  # this host: kvmlab renders for TCG, where the
            del got["accel"]  # passthrough CPU is QEMU's max (kvmlab check says so)
            if expected["cpu"]["model"] == "host-passthrough":
                assert got["cpu"]["model"] == "max"
                got["cpu"]["model"] = "host-passthrough"
        if name == "windows-clock":  # the SATA disk: kvmlab says it is now virtio-blk
            assert any("sata" in line for line in made.stderr.splitlines())
        assert got == expected
        again = cli(
            libvirtd.env, "import", f"domain:{domain}", "-c", libvirtd.uri, "--out", str(lab)
        )
        assert again.returncode == 2 and "overwrites nothing" in again.stderr
    finally:
        _virsh(libvirtd.uri, "undefine", domain)


@pytest.mark.parametrize(("name", "vm"), [("nested-l1", "centos7"), ("windows-clock", "win10")])
def test_an_imported_lab_boots_with_kvmlab_s_image(
    libvirtd: Daemon, tmp_path: Path, name: str, vm: str
) -> None:
    """The nested write-up's L1 domain and the exit-storm write-up's Windows domain,
    imported from their XML files with --boot-image: their shapes (machine, 2 vCPUs, 4 GiB,
    host-passthrough, the clock, an e1000/e1000e on a network) boot under kvmlab and answer
    the agent; the domains' disks are never attached. (The DPDK write-up's domain:
    tests/net/test_import_dpdk_boots.py, with its switch.)"""
    lab = tmp_path / f"{vm}.toml"
    made = cli(libvirtd.env, "import", str(DATA / f"{name}.xml"), "--boot-image", "--out", str(lab))
    assert made.returncode == 0, made.stderr
    doc = tomllib.loads(lab.read_text())
    assert "disks" not in doc["guests"][vm]
    up = cli(libvirtd.env, "up", str(lab), timeout=900)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        cpus = cli(libvirtd.env, "exec", f"{vm}/{vm}", "--", "nproc")
        assert cpus.returncode == 0 and cpus.stdout.strip() == "2", cpus.stderr
        links = cli(libvirtd.env, "exec", f"{vm}/{vm}", "--", "ls", "/sys/class/net")
        assert len(links.stdout.split()) >= 2  # lo and the imported NIC
    finally:
        down = cli(libvirtd.env, "down", vm, timeout=300)
        assert down.returncode == 0, down.stderr
