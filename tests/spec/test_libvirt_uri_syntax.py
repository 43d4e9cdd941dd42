"""libvirt URIs: one validator (:func:`kvmlab.spec.backend.check_uri`) for a lab's
``[libvirt] uri``, a guest's ``libvirt_uri`` and ``--connect``, whose refusals are one line
each: a bracketed host is an IPv6 address, a port is 1-65535 after a
host, nothing follows the URI (not even a newline), nothing in it is a space or a control
character. ``render -c`` refuses before it prints anything. Nothing boots."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError, UsageError
from kvmlab.spec import parse_lab
from kvmlab.spec.backend import check_uri, uri_option
from tests.exits.test_cli_inputs import cli

BRACKETS = "between brackets goes an IPv6 address such as [::1] or [fd00::2]"
NO_HOST = (
    "but no host: name the host (qemu+tcp://HOST:PORT/system), or leave both out for this "
    "host's daemon (qemu:///system)"
)
BAD = {
    "qemu+tcp://[:::::]/system": f"[:::::] is not an IPv6 address; {BRACKETS}",
    "qemu+tcp://[1:2]/system": f"[1:2] is not an IPv6 address; {BRACKETS}",
    "qemu+tcp://[127.0.0.1]/system": f"[127.0.0.1] is not an IPv6 address; {BRACKETS}",
    "qemu+tcp://:5000/system": f" gives port 5000 {NO_HOST}",
    "qemu+ssh://root@/system": f" gives a user {NO_HOST}",
    "qemu+tcp://h:0/system": "port '0' is not 1-65535",
    "qemu+tcp://h:65536/system": "port '65536' is not 1-65535",
    "qemu+tcp://h:/system": "port '' is not 1-65535",
    "qemu:///system\n": "holds '\\n' at character 15; a libvirt URI has no spaces or control "
    "characters: remove it",
    "qemu+ssh://a b/system": "holds ' ' at character 13",
    "qemu:///system\x1b[2J": "holds '\\x1b' at character 15",
    "qemu:///system/x": "is not a libvirt URI of the QEMU driver's system instance",
}


def problems(text: str) -> list[str]:
    """The lines ``check`` refuses the lab ``text`` with (the file named lab.toml)."""
    with pytest.raises(SpecError) as caught:
        parse_lab(text.encode(), "lab.toml")
    return caught.value.lines()


@pytest.mark.parametrize("uri", sorted(BAD))
def test_a_bad_uri_is_one_line_in_a_lab(uri: str) -> None:
    toml = uri.replace("\\", "\\\\").replace("\n", "\\n").replace("\x1b", "\\u001b")
    (line,) = problems(f'name = "x"\n[guests.vm]\nlibvirt_uri = "{toml}"\n')
    assert line.startswith(f"lab.toml: guests.vm.libvirt_uri: {uri!r}")
    assert BAD[uri] in line
    (line,) = problems(f'name = "x"\n[libvirt]\nuri = "{toml}"\n[guests.vm]\n')
    assert line.startswith(f"lab.toml: libvirt.uri: {uri!r}") and BAD[uri] in line


@pytest.mark.parametrize("uri", sorted(BAD))
def test_connect_says_what_a_lab_says(uri: str) -> None:
    with pytest.raises(ValueError) as lab:
        check_uri(uri)
    with pytest.raises(UsageError) as option:
        uri_option(uri, "--connect")
    assert str(option.value) == f"--connect: {lab.value}"


def test_render_refuses_a_bad_connect_before_printing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text('name = "x"\n[guests.vm]\n')
    proc = cli(capsys, "render", str(lab), "-f", "libvirt", "-c", "qemu+tcp://[1:2]/system")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"kvmlab: --connect: 'qemu+tcp://[1:2]/system': [1:2] is not an IPv6 address; {BRACKETS}\n"
    )


@pytest.mark.parametrize(
    "uri",
    [
        "qemu:///system",
        "qemu+ssh://user@host.example/system",
        "qemu+tcp://127.0.0.1:16509/system",
        "qemu+tcp://[::1]:16509/system",
        "qemu+tls://[fd00::2]/system",
        "qemu+ssh://h/system?keyfile=/root/.ssh/id&no_tty=1",
    ],
)
def test_good_uris_pass(uri: str) -> None:
    assert check_uri(uri) == uri
