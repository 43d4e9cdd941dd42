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


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--tcp-port", "16600", "--listen", "host2"], "--listen 'host2': give an IP address"),
        (["--listen", "10.77.0.2"], "--listen and --netns go with --tcp-port"),
        (["--netns", "h2"], "--listen and --netns go with --tcp-port"),
        (["--tcp-port", "16600", "--netns", "../x"], "--netns '../x': a namespace name"),
        (
            ["--tcp-port", "16600", "--listen", 'fe80::1%x"\nunix_sock_rw_perms = "0777'],
            "give an IP address",
        ),
        (["--tcp-port", "16600", "--listen", "0.0.0.0"], "a wildcard"),
        (["--tcp-port", "16600", "--listen", "10.77.0.2"], "without --netns: an unauthenticated"),
        (
            ["--tcp-port", "16600", "--netns", "kvmlab-nosuch-ns"],
            "--netns kvmlab-nosuch-ns: no such network namespace (ip netns add",
        ),
    ],
)
def test_a_second_host_daemon_with_a_bad_network_is_refused_before_anything(
    args: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    assert run(["libvirtd", "start", "host2", *args], monkeypatch) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not (tmp_path / "run" / ".libvirtd").exists()


def test_the_tcp_uri_names_the_address_it_listens_on() -> None:
    from kvmlab.runtime.libvirt.private import PrivateDaemon

    assert PrivateDaemon("h", tcp_port=16600).tcp_uri == "qemu+tcp://127.0.0.1:16600/system"
    far = PrivateDaemon("h", tcp_port=16600, listen="10.77.0.2", netns="h2")
    assert far.tcp_uri == "qemu+tcp://10.77.0.2:16600/system"
    assert (
        PrivateDaemon("h", tcp_port=1, listen="fd00::2").tcp_uri == "qemu+tcp://[fd00::2]:1/system"
    )
    assert PrivateDaemon("h").tcp_uri is None


def test_a_tampered_record_names_no_address_or_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """daemon.json is a file: a listen address or namespace written into it by hand is
    checked again when read (``list`` shows defaults, never the text)."""
    import json

    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    from kvmlab.proc.confined import checked_run_root

    root = checked_run_root() / ".libvirtd" / "host2"
    root.mkdir(parents=True)
    record = {"pid": 0, "tcp_port": 1, "listen": "evil@x/", "netns": "../../x"}
    (root / "daemon.json").write_text(json.dumps(record))
    assert run(["libvirtd", "list", "-o", "json"], monkeypatch) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["tcp_uri"] == "qemu+tcp://127.0.0.1:1/system" and rows[0]["netns"] is None
    (root / "daemon.json").write_text(json.dumps({**record, "listen": None}))
    assert run(["libvirtd", "list", "-o", "json"], monkeypatch) == 0
