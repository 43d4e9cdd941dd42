"""``kvmlab tune`` prints no escape sequence it did not write itself.

``KVMLAB_TUNING_STATE=$'/x/a\\e[31m.json' kvmlab tune apply`` printed the path raw
("originals saved in ...^[[31m"): every path and value ``kvmlab tune`` prints (the state
file's path, values read from /proc and /sys, the errors naming them) goes through
:func:`kvmlab.errors.printable`. Run in-process on a stand-in host root
(:data:`kvmlab.net.tune.HOST_ROOT`), never this host's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvmlab.cli.main import main
from kvmlab.net import tune
from tests.net.test_tune import host  # noqa: F401  (the stand-in root fixture)

ESC = "\x1b[31m"
RESET = "\x1bc"
"""ESC c resets a terminal: a value read from /proc or /sys holding it (a THP-style
``[choice]`` is parsed, so values here carry no bracket)."""


def run(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["kvmlab", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    code = exited.value.code
    return code if isinstance(code, int) else 0


@pytest.fixture
def escaped_state(
    host: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """A state file path with an escape sequence in a directory's and the file's name,
    on the stand-in root."""
    states = tmp_path / f"st{ESC}"
    states.mkdir(mode=0o700)
    path = states / f"a{ESC}.json"
    monkeypatch.setattr(tune, "HOST_ROOT", host)
    monkeypatch.setenv("KVMLAB_TUNING_STATE", str(path))
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "r.sqlite"))
    return path


def test_apply_names_the_state_file_escaped(
    escaped_state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(monkeypatch, "tune", "apply", "--isolate", "1") == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err
    shown = str(escaped_state).replace(ESC, "\\x1b[31m")
    assert f"originals saved in {shown}; 'kvmlab tune rollback' restores them" in out
    assert escaped_state.exists()

    assert run(monkeypatch, "tune", "apply", "--isolate", "1") == 3  # applied already
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err
    assert err == f"kvmlab: tuning is applied already ({shown}); 'kvmlab tune rollback' first\n"

    assert run(monkeypatch, "tune", "rollback") == 0
    assert not escaped_state.exists()
    assert "\x1b" not in "".join(capsys.readouterr())


def test_values_read_from_the_host_are_escaped(
    host: Path,  # noqa: F811
    escaped_state: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(monkeypatch, "tune", "apply", "--isolate", "1") == 0
    capsys.readouterr()
    (host / "proc/sys/kernel/nmi_watchdog").write_text(f"{RESET}2\n")  # changed since, oddly
    assert run(monkeypatch, "tune", "rollback") == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err
    assert "  left     nmi_watchdog: is \\x1bc2, not the 0 kvmlab wrote" in out


def test_verify_escapes_what_it_reads(
    host: Path,  # noqa: F811
    escaped_state: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (host / "sys/kernel/mm/ksm/run").write_text(f"{RESET}1\n")
    assert run(monkeypatch, "tune", "verify", "--isolate", "1") == 1
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err
    assert "  FAILED   KSM: is \\x1bc1, wanted 0" in out
