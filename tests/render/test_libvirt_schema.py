"""libvirt's own schema (virt-xml-validate) accepts the XML of every guest of every lab."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kvmlab.render import Accel, render_libvirt
from kvmlab.spec import LoadedLab
from tests.conftest import target_for

pytestmark = pytest.mark.functional


@pytest.mark.parametrize("accel", ["tcg", "kvm"])
def test_xml_passes_virt_xml_validate(shipped_lab: LoadedLab, accel: Accel, tmp_path: Path) -> None:
    assert shutil.which("virt-xml-validate"), "virt-xml-validate missing: make deps installs it"
    for path, guest in shipped_lab.lab.walk():
        xml = tmp_path / f"{'-'.join(path)}.xml"
        xml.write_text(render_libvirt(guest, target_for(shipped_lab, path, accel)))
        proc = subprocess.run(
            ["virt-xml-validate", str(xml), "domain"], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, f"{xml.name}: {proc.stdout}{proc.stderr}"
        assert "validates" in proc.stdout + proc.stderr


def test_invalid_xml_is_rejected(tmp_path: Path) -> None:
    """The validator really checks: an unknown element fails (guards the test above)."""
    bad = tmp_path / "bad.xml"
    bad.write_text("<domain type='qemu'><name>x</name><bogus/></domain>")
    proc = subprocess.run(
        ["virt-xml-validate", str(bad), "domain"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
