"""``kvmlab libvirtd`` given names that are not on record (issue 28, item 6): refused in one
line, nothing started. No daemon runs here: a record is written by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvmlab.cli.main import main


def run(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["kvmlab", *argv])
    with pytest.raises(SystemExit) as info:
        main()
    return int(info.value.code or 0)


@pytest.mark.parametrize("made_root", [False, True])
def test_stopping_a_daemon_that_never_existed_is_refused(
    made_root: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    if made_root:
        from kvmlab.proc.confined import checked_run_root

        checked_run_root()
    assert run(["libvirtd", "stop", "ghost"], monkeypatch) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "kvmlab: no private libvirtd named ghost; kvmlab libvirtd list shows the daemons on record"
    ]
    assert not (tmp_path / "run" / ".libvirtd").exists()


def test_stopping_a_dead_daemon_on_record_removes_its_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kvmlab.proc.confined import create_owned
    from kvmlab.runtime.libvirt.private import PrivateDaemon

    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    daemon = PrivateDaemon("gone")
    create_owned(daemon.root.parent, "private libvirtd daemons")
    create_owned(daemon.root, "private libvirtd gone")
    daemon.save()
    assert run(["libvirtd", "stop", "gone"], monkeypatch) == 0
    err = capsys.readouterr().err
    assert err == "private libvirtd gone was not running (its state is removed)\n"
    assert not daemon.root.exists()
