"""Every shipped lab renders to exactly the recorded QEMU argv and libvirt XML.

Set KVMLAB_UPDATE_GOLDEN=1 to rewrite the files after an intended change, then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvmlab.render import render_libvirt, render_qemu
from kvmlab.spec import LoadedLab
from tests.conftest import target_for

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def _compare(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KVMLAB_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with KVMLAB_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden file"


@pytest.mark.parametrize("accel", ["tcg", "kvm"])
def test_qemu_argv_matches_golden(shipped_lab: LoadedLab, accel: str) -> None:
    for path, guest in shipped_lab.lab.walk():
        target = target_for(shipped_lab, path, accel)  # type: ignore[arg-type]
        stem = "-".join((shipped_lab.lab.name, *path))
        _compare(f"{stem}.{accel}.qemu.sh", render_qemu(guest, target).shell())


@pytest.mark.parametrize("accel", ["tcg", "kvm"])
def test_libvirt_xml_matches_golden(shipped_lab: LoadedLab, accel: str) -> None:
    for path, guest in shipped_lab.lab.walk():
        target = target_for(shipped_lab, path, accel)  # type: ignore[arg-type]
        stem = "-".join((shipped_lab.lab.name, *path))
        _compare(f"{stem}.{accel}.xml", render_libvirt(guest, target))
