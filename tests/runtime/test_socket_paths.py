"""A run directory too long for a guest's unix sockets: QMP, guest agent,
console and relay sockets past the 107-byte limit are refused before anything starts,
naming KVMLAB_RUN_DIR, the length and the fix. Nothing boots: starting is stubbed out."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvmlab.cli.main import app
from kvmlab.errors import StateError
from kvmlab.render.runfiles import UNIX_PATH_MAX
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.rundir import LabDir, check_socket_paths


def _never(*_: object, **__: object) -> None:
    raise AssertionError("a guest or switch would start")


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labrun, "_boot_all", _never)
    monkeypatch.setattr(labrun, "_start_switch", _never)


def long_root(tmp_path: Path, size: int) -> Path:
    """A run root of ``size`` bytes below ``tmp_path``."""
    root = tmp_path / ("r" * (size - len(str(tmp_path)) - 1))
    assert len(str(root)) == size
    return root


def test_up_refuses_a_run_dir_too_long_for_a_guests_sockets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nothing_starts: None
) -> None:
    lab = tmp_path / "sock.toml"
    lab.write_text('name = "sock"\n[guests.vm]\n')
    root = long_root(tmp_path, 100)
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(root))
    result = CliRunner().invoke(app, ["up", str(lab)])
    assert isinstance(result.exception, StateError), result.output
    console = f"{root}/sock/vm/console.sock"  # the longest of qmp, qga and console
    assert str(result.exception) == (
        f"KVMLAB_RUN_DIR '{str(root)[:60]}...' (100 characters) is too long: the console "
        f"socket of guest sock/vm would be {len(console)} bytes long, and a unix socket path "
        f"takes at most {UNIX_PATH_MAX}; set KVMLAB_RUN_DIR to a directory of at most "
        f"{100 - (len(console) - UNIX_PATH_MAX)} bytes"
    )
    assert not root.exists(), "refused before anything is created"


def test_a_run_dir_that_fits_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nothing_starts: None
) -> None:
    lab = tmp_path / "sock.toml"
    lab.write_text('name = "sock"\n[guests.vm]\n')
    root = long_root(tmp_path, UNIX_PATH_MAX - len("/sock/vm/console.sock"))
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(root))
    result = CliRunner().invoke(app, ["up", str(lab)])
    assert isinstance(result.exception, AssertionError), result.output  # reached the start


def fixed_root(monkeypatch: pytest.MonkeyPatch, size: int) -> Path:
    """KVMLAB_RUN_DIR of ``size`` bytes (never created: only path lengths are checked)."""
    root = Path("/tmp") / ("r" * (size - len("/tmp/")))
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(root))
    return root


def test_a_guest_hypervisors_relay_sockets_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guest hypervisor's relay to each guest inside it (``relay-NAME.sock``) is the
    longest of its sockets (the agent link in the inner guest's directory is 2 bytes
    shorter)."""
    root = fixed_root(monkeypatch, 60)
    assert len(f"{root}/n/l1/relay-{'l' * 32}.sock") > UNIX_PATH_MAX
    with pytest.raises(StateError, match=rf"the relay socket of guest n/l1 \(to {'l' * 32}\)"):
        check_socket_paths(LabDir.of("n"), [(("l1",), ["l" * 32])])
    check_socket_paths(LabDir.of("n"), [(("l1",), ["l2"])])


def test_names_too_long_for_any_run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path))
    with pytest.raises(
        StateError, match="whatever the run directory; give the lab or its guests shorter names"
    ):
        check_socket_paths(LabDir.of("x" * 32), [(("a" * 32,), ["b" * 32])])


def test_switch_ports_are_checked_with_the_guests(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed_root(monkeypatch, 80)
    sock = LabDir.of("sw").root / "switch" / f"{'p' * 32}.sock"
    with pytest.raises(StateError, match=f"the switch port {'p' * 32} socket of lab sw"):
        check_socket_paths(LabDir.of("sw"), [], [(f"switch port {'p' * 32}", sock)])
