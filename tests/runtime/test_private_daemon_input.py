"""``kvmlab libvirtd`` given names that are not on record: refused in one
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
    assert err == (
        "private libvirtd gone was not running (nothing was signalled); its state is removed\n"
    )
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


def _record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> Path:
    """A daemon directory of kvmlab's (marked) with ``text`` as its record."""
    from kvmlab.proc.confined import create_owned
    from kvmlab.runtime.libvirt.private import PrivateDaemon

    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    daemon = PrivateDaemon(name)
    create_owned(daemon.root.parent, "private libvirtd daemons")
    create_owned(daemon.root, f"private libvirtd {name}")
    (daemon.root / "daemon.json").write_text(text)
    return daemon.root


TAMPERED = [
    ('{"pid": "abc"}', 'pid is "abc", not a process id'),
    ("[1, 2]", "not a JSON object of a daemon's record"),
    ("null", "not a JSON object of a daemon's record"),
    ("{x", "not JSON"),
    ("[" * 30_000, "not JSON (nested too deep)"),
    ("[" * 100_000, "larger than 64 KiB"),
    (r'{"pid": 1, "tcp_port": "\u001b[31m16600"}', "tcp_port is"),
    ('{"pid": 1, "tcp_port": 1}', "not a TCP port from 1024 to 65535"),
    ('{"pid": true}', "pid is true"),
    ('{"pid": 1, "listen": "evil@x/"}', 'listen is "evil@x/", not an IP address'),
    ('{"pid": 1, "netns": "../../x"}', 'netns is "../../x", not a namespace name'),
    ('{"pid": 1, "shell": "rm -rf /"}', "'shell' is not a key of a daemon's record"),
]


@pytest.mark.parametrize(("text", "said"), TAMPERED)
def test_a_tampered_record_is_listed_as_unreadable_beside_the_others(
    text: str,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One bad record hides no other: ``list`` shows it as unreadable, with why, in one
    escaped line, and the good one as it is; JSON likewise."""
    import json

    _record(tmp_path, monkeypatch, "bad", text)
    _record(tmp_path, monkeypatch, "good", json.dumps({"pid": 0, "tcp_port": 16600}))
    assert run(["libvirtd", "list"], monkeypatch) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "STATE", "URI", "TCP", "URI"]
    bad = next(line for line in out if line.startswith("bad "))
    assert "unreadable" in bad and said in bad, bad
    assert "\x1b" not in "".join(out)
    assert any(line.startswith("good ") and "tcp://127.0.0.1:16600" in line for line in out)
    assert run(["libvirtd", "list", "-o", "json"], monkeypatch) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["daemons"]}
    assert rows["bad"]["state"] == "unreadable" and said in rows["bad"]["problem"]
    assert rows["good"]["state"] == "dead"


@pytest.mark.parametrize(("text", "said"), TAMPERED[:4])
def test_stop_removes_a_tampered_record_and_signals_nothing(
    text: str,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _record(tmp_path, monkeypatch, "bad", text)
    assert run(["libvirtd", "stop", "bad"], monkeypatch) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("note: ") and said in err[0], err
    assert "was not running" in err[1] and "signalled" in err[1], err
    assert not root.exists()


def test_list_takes_text_or_json_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    assert run(["libvirtd", "list", "-o", "yaml"], monkeypatch) == 2
    assert "choose text or json (got 'yaml')" in capsys.readouterr().err


def test_a_long_name_is_told_the_limit_and_shown_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    assert run(["libvirtd", "start", "a" * 41], monkeypatch) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "names are 1-32 lower-case letters" in line, line
    assert run(["libvirtd", "start", "a" * 5000], monkeypatch) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "(5000 characters)" in line and len(line) < 250, line


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ("/tmp/" + "y" * 300, "a component of 300 bytes, more than the file system's 255"),
        ("/tmp/a\x1bb", "a control character in a path"),
        ("/tmp/" + "/z" * 700, "bytes long, more than 1024"),
    ],
)
@pytest.mark.parametrize("command", [["ps"], ["libvirtd", "list"]])
def test_a_run_directory_the_file_system_cannot_hold_is_one_line(
    env: str,
    said: str,
    command: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", env.replace("\\x1b", "\x1b"))
    assert run(command, monkeypatch) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("kvmlab: KVMLAB_RUN_DIR=") and said in line, line


@pytest.mark.parametrize(
    ("port", "said"),
    [
        ("80", "give a number from 1024 to 65535"),
        ("abc", "give a whole number"),
        ("9" * 30, "give a number from 1024 to 65535"),
        ("1024.5", "give a whole number"),
    ],
)
def test_a_bad_tcp_port_is_told_in_kvmlab_s_words(
    port: str,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    assert run(["libvirtd", "start", "h", "--tcp-port", port], monkeypatch) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"'--tcp-port': {said} (see" in line and "is not" not in line, line
