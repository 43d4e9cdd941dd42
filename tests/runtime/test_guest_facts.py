"""What later commands need of a guest is recorded as itself, from its spec and target
(``migratable``, its NICs), never read back from a command line: for every shipped lab
it says what the rendered QEMU command line says."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.render import Accel, render_qemu
from kvmlab.render.devices.control import ControlPart
from kvmlab.runtime.lab import guest_nics
from kvmlab.runtime.records import LEGACY_PROBE_PORT, argv_nics
from kvmlab.spec import load_lab
from tests.conftest import LAB_FILES, target_for


@pytest.mark.parametrize("lab_file", LAB_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("accel", ["tcg", "kvm"])
def test_the_recorded_facts_are_what_the_command_line_says(lab_file: Path, accel: Accel) -> None:
    loaded = load_lab(lab_file)
    for path, guest in loaded.lab.walk():
        target = target_for(loaded, path, accel)
        argv = render_qemu(guest, target).argv
        assert list(guest_nics(guest, target, accel)) == argv_nics(argv)
        assert ControlPart(target).probe == any(LEGACY_PROBE_PORT in a for a in argv)
