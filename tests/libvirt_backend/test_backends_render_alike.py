"""The guest cannot tell which backend ran it: for every shipped lab and every variant, each
L1 guest's QEMU command line (``kvmlab render -o json``) and its libvirt domain (``kvmlab
render -o libvirt``, turned into a command line by libvirt itself with ``virsh
domxml-to-native qemu-argv``) describe the same guest: CPU model, flags and topology, memory
and its backing, NUMA, clock and timers, Hyper-V, disks, and each NIC's model and MAC, read
back by the importer (:mod:`kvmlab.spec.importing`) from both command lines alike.

libvirt's conversion turns every interface into a tap of that name and drops its queues and
addresses, so NICs are compared by model and MAC; under TCG kvmlab leaves out the KVM PIT's
tick policy, which libvirt passes on as a global for a device a TCG QEMU does not have."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kvmlab.spec import load_lab
from kvmlab.spec.importing import from_qemu_argv
from tests.conftest import LAB_FILES, cli
from tests.libvirt_backend.conftest import Daemon

pytestmark = pytest.mark.functional


def _seen(guest: dict[str, Any], accel: str) -> dict[str, Any]:
    """What the guest sees, as both command lines can say it."""
    guest = dict(guest)
    # by MAC: libvirt's conversion lists interfaces in XML order and a qemu:commandline one
    # last, whatever the PCI slots the guest enumerates them by (tests/render/test_nic_slots.py)
    guest["nics"] = sorted((n["model"], n.get("mac")) for n in guest.get("nics", []))
    pit = guest.get("clock", {}).get("timers", {}).get("pit", {})
    if accel == "tcg":
        pit.pop("tickpolicy", None)
        if not pit:
            guest.get("clock", {}).get("timers", {}).pop("pit", None)
    timers = guest.get("clock", {}).get("timers", {})
    for default_on in ("hpet", "kvmclock"):  # present = QEMU's default: said or not, the same
        if timers.get(default_on) == {"present": True}:
            del timers[default_on]
    guest.pop("accel", None)
    return guest


def _cases() -> list[tuple[Path, str]]:
    return [(path, variant) for path in LAB_FILES for variant in ("", *load_lab(path).lab.variants)]


@pytest.mark.parametrize(
    ("lab", "variant"), _cases(), ids=lambda v: v.stem if isinstance(v, Path) else v or "as-written"
)
def test_both_backends_render_the_same_guest(
    libvirtd: Daemon, tmp_path: Path, lab: Path, variant: str
) -> None:
    if shutil.which("virsh") is None:
        pytest.skip("virsh is not installed (make deps installs it)")
    chosen = ["--variant", variant] if variant else []
    rendered = cli(libvirtd.env, "render", str(lab), *chosen, "-o", "json")
    assert rendered.returncode == 0, rendered.stderr
    compared = 0
    for guest in json.loads(rendered.stdout)["guests"]:
        if guest["level"] != "L1":
            continue
        name = guest["guest"]
        accel = guest["argv"][guest["argv"].index("-accel") + 1].split(",")[0]
        argv = shlex.join(guest["argv"])
        xml = cli(libvirtd.env, "render", str(lab), *chosen, "-g", name, "-o", "libvirt")
        assert xml.returncode == 0, xml.stderr
        domain = tmp_path / f"{name}.xml"
        domain.write_text(xml.stdout)
        native = subprocess.run(
            ["virsh", "-c", libvirtd.uri, "domxml-to-native", "qemu-argv", str(domain)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if "hugetlbfs filesystem is not mounted" in native.stderr:
            continue  # libvirt converts huge-page domains only where hugetlbfs is mounted
        if "Cannot check QEMU binary" in native.stderr:
            continue  # a variant for a QEMU this host does not have (scripts/qemu10.sh)
        assert native.returncode == 0, native.stderr
        qemu = _seen(from_qemu_argv(argv, "render -o json").guest, accel)
        libvirt = _seen(from_qemu_argv(native.stdout, "domxml-to-native").guest, accel)
        assert libvirt == qemu, f"{lab.stem} {variant} {name}"
        compared += 1
    if not compared:
        pytest.skip(f"{lab.stem} {variant}: no L1 guest libvirt converts on this host")
