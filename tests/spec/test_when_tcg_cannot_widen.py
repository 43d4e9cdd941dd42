"""``when_tcg`` (a guest's settings under TCG) may narrow or retune what the guest has, never
widen what it exposes of the host: no more of the host's files shown, no port open beyond
loopback, no host file, writable disk or host attachment the guest as written lacks. Each
refusal is one line naming the key. ``check`` runs as a user would; nothing boots."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.spec import load_lab
from tests.spec.labcheck import FWD, HEAD, check, refused

ANY = FWD.format(addr=', host_addr = "0.0.0.0"')
SEES = "when_tcg may not widen what a guest sees of the host"


WIDER = {
    "show-root": (
        'when_tcg = { host_view = { show = ["/"] } }\n',
        "host_view.show",
        f"'/' shows the guest more of the host than as written; {SEES}: set host_view on the "
        "guest itself",
    ),
    "show-outside": (
        'host_view = { show = ["/root/.ssh"] }\nwhen_tcg = { host_view = { show = ["/root"] } }\n',
        "host_view.show",
        f"'/root' shows the guest more of the host than as written; {SEES}: set host_view on "
        "the guest itself",
    ),
    "unhide": (
        'host_view = { hide = ["/srv"] }\nwhen_tcg = { host_view = { hide = [] } }\n',
        "host_view.hide",
        f"drops '/srv', which the guest as written hides; {SEES}: keep it in the list",
    ),
    "listen-anywhere": (
        f"when_tcg = {{ nics = [{ANY}] }}\n",
        "nics[0].forwards[0].host_addr",
        "0.0.0.0 (port 2222/tcp) listens beyond loopback, which the guest as written does "
        "not; when_tcg may not open ports to other hosts: forward it on the guest itself",
    ),
    "share-the-root": (
        'boot = "disk"\ndisks = [{ path = "d.qcow2" }]\nwhen_tcg = { boot = "image" }\n',
        "boot",
        f"shares the host's root with the guest, which the guest as written does not; {SEES}: "
        "set boot on the guest itself",
    ),
}


@pytest.mark.parametrize("case", sorted(WIDER))
def test_when_tcg_cannot_widen_exposure(case: str, tmp_path: Path) -> None:
    body, key, message = WIDER[case]
    lab, line = refused(tmp_path, HEAD + body)
    assert line == f"kvmlab: {lab}: guests.vm.when_tcg.{key}: {message}"


NARROWER = {
    "show-less": 'host_view = { show = ["/root"] }\n'
    'when_tcg = { host_view = { show = ["/root/a"] } }\n',
    "hide-more": 'when_tcg = { host_view = { hide = ["/srv"] } }\n',
    "loopback": f"when_tcg = {{ nics = [{FWD.format(addr='')}] }}\n",
    "same-forward": f"nics = [{ANY}]\nwhen_tcg = {{ vcpus = 1, nics = [{ANY}] }}\n",
}


@pytest.mark.parametrize("case", sorted(NARROWER))
def test_when_tcg_may_narrow_or_repeat(case: str, tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(HEAD + NARROWER[case])
    proc = check(lab)
    assert proc.returncode == 0, proc.stderr


def test_a_bad_when_tcg_value_names_its_key(tmp_path: Path) -> None:
    lab, line = refused(tmp_path, HEAD + "when_tcg = { vcpus = 0 }\n")
    assert line == (
        f"kvmlab: {lab}: guests.vm.when_tcg.vcpus: 0 is out of range: give a "
        "whole number from 1 to 288"
    )


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        (
            'when_tcg = { disks = [{ path = "/dev/sda", format = "raw" }] }\n',
            "disks[0].path",
            f"'/dev/sda' gives the guest a host file the guest as written does not have; {SEES}: "
            "add the disk on the guest itself",
        ),
        (
            'disks = [{ path = "/d.qcow2", readonly = true }]\n'
            'when_tcg = { disks = [{ path = "/d.qcow2" }] }\n',
            "disks[0].readonly",
            f"makes '/d.qcow2' writable, which the guest as written reads only; {SEES}: keep "
            "readonly = true",
        ),
        (
            'boot = "kernel"\nkernel = "/boot/vmlinuz"\nwhen_tcg = { initrd = "/etc/shadow" }\n',
            "initrd",
            "changes the host file the guest as written uses ('/etc/shadow'); "
            f"{SEES}: set initrd on the guest itself",
        ),
        (
            'when_tcg = { qemu = "/tmp/evil" }\n',
            "qemu",
            f"changes the host file the guest as written uses ('/tmp/evil'); {SEES}: set qemu "
            "on the guest itself",
        ),
        (
            'when_tcg = { nics = [{ type = "tap", ifname = "eth0" }] }\n',
            "nics[0]",
            f"attaches the guest to the host (tap NIC) where the guest as written is not; {SEES}: "
            "add the NIC on the guest itself",
        ),
        (
            'when_tcg = { nics = [{ type = "vhost-user", socket = "/run/x.sock" }] }\n',
            "nics[0]",
            "attaches the guest to the host (vhost-user NIC) where the guest as written is not; "
            f"{SEES}: add the NIC on the guest itself",
        ),
    ],
)
def test_when_tcg_may_not_give_the_guest_more_of_the_host(
    tmp_path: Path, text: str, key: str, message: str
) -> None:
    lab, line = refused(tmp_path, HEAD + text)
    assert line == f"kvmlab: {lab}: guests.vm.when_tcg.{key}: {message}"


def test_when_tcg_may_retune_what_the_guest_already_has(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    tap = '{ type = "tap", ifname = "t0" }'
    lab.write_text(
        HEAD + f'disks = [{{ path = "/d.qcow2" }}]\nnics = [{tap}]\nwhen_tcg = {{ vcpus = 1, '
        'disks = [{ path = "/d.qcow2", cache = "writeback" }], nics = [{ type = "tap", '
        'ifname = "t0", queues = 2 }] }\n'
    )
    assert load_lab(lab).lab.guests["vm"].under("tcg").nics[0].queues == 2
