"""No control character in a path or a line of text a lab passes on (kernel command line,
ssh key): a NUL, an escape or a newline is refused at ``check`` in one line naming where it
is, and an empty path too. ``check`` runs as a user would; nothing boots."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spec.labcheck import HEAD, kvmlab, refused

PATHS = {
    "kernel": ('kernel = "/boot/vmlinuz\\u0000.evil"\n', "guests.vm.kernel", 14),
    "initrd": ('kernel = "/k"\ninitrd = "/i\\u001b[2J"\n', "guests.vm.initrd", 3),
    "disk": ('disks = [{ path = "d\\u0000.qcow2" }]\n', "guests.vm.disks[0].path", 2),
    "socket": (
        'memory = { size = "1G", shared = true }\n'
        'nics = [{ type = "vhost-user", socket = "/tmp/s\\u0000" }]\n',
        "guests.vm.nics[0].socket",
        7,
    ),
    "qemu": ('qemu = "/usr/bin/qemu\\u0000"\n', "guests.vm.qemu", 14),
    "hide": ('host_view = { hide = ["/srv\\u007f"] }\n', "guests.vm.host_view.hide[0]", 5),
}


@pytest.mark.parametrize("case", sorted(PATHS))
def test_a_control_character_in_a_path_is_refused(case: str, tmp_path: Path) -> None:
    body, key, at = PATHS[case]
    lab, line = refused(tmp_path, HEAD + body)
    char = {"kernel": "\\x00", "initrd": "\\x1b", "hide": "\\x7f"}.get(case, "\\x00")
    assert line == (
        f"kvmlab: {lab}: {key}: holds '{char}' at character {at}; a path is "
        "printable text, without NUL, newline or other control characters"
    )


def test_an_empty_path_is_refused(tmp_path: Path) -> None:
    lab, line = refused(tmp_path, HEAD + 'disks = [{ path = "" }]\n')
    assert line == f"kvmlab: {lab}: guests.vm.disks[0].path: is empty; give a path"


def test_a_nul_in_append_is_refused_at_check(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text('name = "x"\n[guests.a]\nappend = "quiet\\u0000init=/bin/sh"\n')
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: {lab}: guests.a.append: holds '\\x00' at character 6; "
        "write it as one line of printable text\n"
    )


def test_an_ssh_key_with_a_newline_is_refused_at_check(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(
        'name = "x"\n[guests.a]\nboot = "disk"\n[[guests.a.disks]]\n'
        'path = "d.qcow2"\n[guests.a.cloud_init]\n'
        'ssh_keys = ["ssh-ed25519 AAAA me\\nssh-rsa BBBB evil"]\n'
    )
    proc = kvmlab("check", str(lab))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"kvmlab: {lab}: guests.a.cloud_init.ssh_keys[0]: holds '\\n' at "
        "character 20; write it as one line of printable text\n"
    )
