"""Every shipped lab renders to exactly the recorded QEMU argv and libvirt XML.

A test run never writes what it checks: after an intended change, rewrite the files with
``.venv/bin/python -m tests.render.golden`` and review the diff.
"""

from __future__ import annotations

import pytest

from kvmlab.render import Accel
from kvmlab.spec import LoadedLab
from tests.render.golden import ACCELS, GOLDEN, renderings

REWRITE = ".venv/bin/python -m tests.render.golden"


def _compare(name: str, text: str) -> None:
    path = GOLDEN / name
    assert path.exists(), f"no golden file {path}; write it with {REWRITE}"
    assert text == path.read_text(), f"{name} differs from its golden file (after an "
    f"intended change: {REWRITE}, then review the diff)"


@pytest.mark.parametrize("accel", ACCELS)
def test_qemu_argv_matches_golden(shipped_lab: LoadedLab, accel: Accel) -> None:
    for name, text in renderings(shipped_lab, accel, "qemu"):
        _compare(name, text)


@pytest.mark.parametrize("accel", ACCELS)
def test_libvirt_xml_matches_golden(shipped_lab: LoadedLab, accel: Accel) -> None:
    for name, text in renderings(shipped_lab, accel, "libvirt"):
        _compare(name, text)


def test_golden_xml_is_well_formed() -> None:
    """Every recorded domain parses as XML (a comment with ``--`` does not)."""
    import xml.etree.ElementTree as ET

    for path in sorted(GOLDEN.glob("*.xml")):
        ET.fromstring(path.read_text())
