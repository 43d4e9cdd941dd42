"""``background`` commands of a guest: validated as shell words, kvmlab's own programs
found beside kvmlab (started for real in tests/exits/test_rtc_storm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import load_lab


def test_background_commands_are_lines_of_shell_words(tmp_path: Path) -> None:
    lab = tmp_path / "l.toml"
    lab.write_text('name = "l"\n[guests.vm]\nbackground = ["kvmlab-rtc --hz 1024", "sleep 1"]\n')
    assert load_lab(lab).lab.guests["vm"].background == ["kvmlab-rtc --hz 1024", "sleep 1"]
    for bad, why in (('""', "an empty command"), ('"a \'b"', "not shell words")):
        lab.write_text(f'name = "l"\n[guests.vm]\nbackground = [{bad}]\n')
        with pytest.raises(SpecError) as info:
            load_lab(lab)
        assert "guests.vm.background[0]: " in str(info.value) and why in str(info.value)


def test_kvmlabs_own_guest_programs_are_found_beside_kvmlab() -> None:
    import sys

    from kvmlab.runtime.lab import background_argv

    beside = Path(sys.executable).with_name("kvmlab-rtc")
    assert beside.is_file(), "the console script is installed beside kvmlab (pyproject.toml)"
    assert background_argv("kvmlab-rtc --hz 512") == [str(beside), "--hz", "512"]
    assert background_argv("kvmlab-nosuch") == ["kvmlab-nosuch"]  # left to the guest's PATH
    assert background_argv("stress-ng --fork 1") == ["stress-ng", "--fork", "1"]
    assert background_argv("/opt/kvmlab-x 'a b'") == ["/opt/kvmlab-x", "a b"]
