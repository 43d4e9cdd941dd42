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


def test_only_kvmlabs_own_programs_are_waited_for_until_they_say_they_run() -> None:
    from kvmlab.runtime.lab import announces_ready

    assert announces_ready("kvmlab-rtc --hz 1024")  # installed beside kvmlab
    assert not announces_ready("/usr/local/bin/kvmlab-rtc")  # a user's, of a like name
    assert not announces_ready("kvmlab-nosuch")  # on the guest's PATH, if anywhere
    assert not announces_ready("stress-ng --fork 1")
    assert not announces_ready("sleep kvmlab-rtc")


@pytest.mark.parametrize("speaks", [True, False])
def test_the_first_line_wait_returns_when_the_program_speaks_or_dies(
    tmp_path: Path, speaks: bool
) -> None:
    """The guest-side wait, run by a real shell against a real process: it holds while the
    program is silent and alive, and returns at its first byte, or at its exit."""
    import subprocess
    import threading
    import time

    from kvmlab.runtime.lab import FIRST_LINE_WAIT

    log = tmp_path / "log"
    log.touch()
    then = "echo ready >" + str(log) + "; sleep 30" if speaks else "exit 3"
    program = subprocess.Popen(["sh", "-c", f"sleep 1; {then}"])
    threading.Thread(target=program.wait, daemon=True).start()  # reaped, as the agent does
    try:
        start = time.monotonic()
        subprocess.run(["sh", "-c", FIRST_LINE_WAIT, str(log), str(program.pid)], timeout=20)
        waited = time.monotonic() - start
        assert 0.9 < waited < 15, waited
        assert (program.poll() is None) is speaks
        assert (log.read_text() == "ready\n") is speaks
    finally:
        program.kill()
        program.wait()
