"""Time limits set badly in the environment (``KVMLAB_CEILING_*``, ``KVMLAB_STALL_*``: not
a number, not finite, not above 0, too large) are read and refused before anything starts.
``up`` runs in-process with the boot and the switch replaced by a failure, so a regression
cannot start QEMU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvmlab.cli.main import main
from tests.conftest import LABS


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KVMLAB_CEILING_QMP", "nan"),
        ("KVMLAB_STALL_BOOT", "-1"),
        ("KVMLAB_CEILING_AGENT", "inf"),
        ("KVMLAB_STALL_SETUP", "1e308"),
        ("KVMLAB_CEILING_INNER_UP", "x" * 3000),
    ],
)
def test_a_bad_limit_is_refused_before_anything_starts(
    name: str,
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kvmlab.runtime import lab as labrun

    def no_start(*_: object, **__: object) -> None:
        raise AssertionError("something was started")

    monkeypatch.setattr(labrun, "_boot_all", no_start)
    monkeypatch.setattr(labrun, "_start_switch", no_start)
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["kvmlab", "up", str(LABS / "basic.toml")])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("kvmlab:")]
    assert len(lines) == 1 and lines[0].startswith(f"kvmlab: {name}=")
    assert lines[0].endswith("give a number of seconds above 0 and at most 1e+06")
    assert len(lines[0]) < 200
