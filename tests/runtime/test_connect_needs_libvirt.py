"""``--connect`` needs the libvirt backend: without it, refused in one line before anything
starts, instead of asking a daemon; with it (or a lab on libvirt), the daemon it names.
``up``, ``bench`` and ``run`` run in-process with the boot and the switch replaced by a
failure, so a regression cannot start QEMU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvmlab.cli.backend_opts import BackendOptions, choose_backend
from kvmlab.cli.main import main
from kvmlab.runtime.libvirt.backend import LibvirtBackend
from kvmlab.spec import load_lab
from tests.conftest import LABS

URI = "qemu+tcp://127.0.0.1:16599/system"


@pytest.mark.parametrize("command", ["up", "bench", "run"])
def test_connect_on_a_qemu_lab_is_refused_before_anything_starts(
    command: str,
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
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "r.sqlite"))
    lab = LABS / "basic.toml"
    monkeypatch.setattr(sys, "argv", ["kvmlab", command, str(lab), "--connect", URI])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"kvmlab: --connect: {lab} runs on the qemu backend; add --backend libvirt "
        '(or backend = "libvirt" in the lab)'
    ]
    assert not (tmp_path / "r.sqlite").exists()


def test_connect_picks_the_daemon_of_a_lab_on_libvirt(tmp_path: Path) -> None:
    text = (LABS / "basic.toml").read_text()
    (tmp_path / "basic.toml").write_text('backend = "libvirt"\n' + text)
    loaded = load_lab(tmp_path / "basic.toml")
    chosen = choose_backend(loaded, BackendOptions(None, URI, None))
    assert isinstance(chosen, LibvirtBackend) and chosen.uri == URI


def test_connect_with_backend_libvirt_is_taken() -> None:
    loaded = load_lab(LABS / "basic.toml")
    chosen = choose_backend(loaded, BackendOptions("libvirt", URI, None))
    assert isinstance(chosen, LibvirtBackend) and chosen.uri == URI
