"""Lab files as a careless or hostile author writes them (issue 28, items 5 and 6):
``when_tcg`` cannot widen what a guest exposes, ``check`` summarises what runs on this
host, a path never holds a control character, and every refusal is one line in kvmlab's
own words (no regex, no pydantic phrasing, no 3000-character value echoed). ``check``
runs as a user would; nothing boots."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from kvmlab.cli.main import app
from kvmlab.host.accel import AccelChoice
from kvmlab.runtime.lab import HostAccel
from kvmlab.spec import Lab, load_lab
from tests.conftest import LABS

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def check(lab: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [KVMLAB, "check", str(lab)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def refused(tmp_path: Path, text: str | bytes) -> tuple[Path, str]:
    """The one line ``check`` refuses the lab ``text`` with (its file's path first)."""
    lab = tmp_path / "lab.toml"
    lab.write_bytes(text if isinstance(text, bytes) else text.encode())
    proc = check(lab)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    return lab, line


HEAD = 'name = "x"\n[guests.vm]\n'
FWD = '{{ type = "user", forwards = [{{ host_port = 2222, guest_port = 22{addr} }}] }}'
ANY = FWD.format(addr=', host_addr = "0.0.0.0"')
SEES = "when_tcg may not widen what a guest sees of the host"

# ---- 1. when_tcg cannot widen what a guest exposes ------------------------------------------

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


# ---- 2. check's summary is what runs on this host -------------------------------------------


def invoke_check(monkeypatch: pytest.MonkeyPatch, accel: str, *args: str) -> str:
    """``kvmlab check`` in-process on a host whose accel=auto gives ``accel``."""
    host = HostAccel(accel, "test", "svm")  # type: ignore[arg-type]
    choice = AccelChoice(accel, "test", "kvm_amd")  # type: ignore[arg-type]
    monkeypatch.setattr("kvmlab.cli.hostinfo.host_accel", lambda: (host, choice))
    result = CliRunner().invoke(app, ["check", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_summary_applies_when_tcg_on_a_tcg_host(monkeypatch: pytest.MonkeyPatch) -> None:
    out = invoke_check(monkeypatch, "tcg", str(LABS / "nested.toml"))
    l1, l2 = out.splitlines()[1:]
    assert l1 == (
        "  L1 l1: guest hypervisor 1 vCPU, 4G anonymous RAM, 2 disk(s), NICs: user, "
        "cpu host-passthrough; under TCG here, with its when_tcg (vcpus)"
    )
    assert l2.startswith("  L2 l1/l2: 2 vCPU,"), "L2 runs under KVM inside l1, as render says"


def test_the_summary_is_the_lab_as_written_on_a_kvm_host(monkeypatch: pytest.MonkeyPatch) -> None:
    out = invoke_check(monkeypatch, "kvm", str(LABS / "nested.toml"))
    assert out.splitlines()[1].startswith("  L1 l1: guest hypervisor 2 vCPU,")
    assert "when_tcg" not in out


def test_a_nic_added_under_tcg_is_in_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(HEAD + 'when_tcg = { nics = [{ type = "user" }], memory = "2G" }\n')
    out = invoke_check(monkeypatch, "tcg", str(lab))
    assert out.splitlines()[1] == (
        "  L1 vm: 1 vCPU, 2G anonymous RAM, 0 disk(s), NICs: user, cpu host-passthrough; "
        "under TCG here, with its when_tcg (nics, memory)"
    )
    doc = json.loads(invoke_check(monkeypatch, "tcg", str(lab), "-o", "json"))
    (vm,) = doc["labs"][0]["guests"]
    assert (vm["nics"], vm["accel"], vm["when_tcg_applied"]) == (["user"], "tcg", True)


def test_accel_set_in_the_lab_wins_over_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(HEAD + 'accel = "tcg"\nvcpus = 2\nwhen_tcg = { vcpus = 1 }\n')
    assert "1 vCPU" in invoke_check(monkeypatch, "kvm", str(lab))


def test_the_summary_matches_render_on_this_host() -> None:
    """Installed command, this host's own accelerator: check says what render gives."""
    nested = str(LABS / "nested.toml")
    rendered = subprocess.run(
        [KVMLAB, "render", nested, "-g", "l1"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    summary = check(Path(nested))
    assert rendered.returncode == 0 and summary.returncode == 0, rendered.stderr
    argv = [line.strip() for line in rendered.stdout.splitlines()]
    smp = next(line.split()[1] for line in argv if line.startswith("-smp"))
    assert f"L1 l1: guest hypervisor {smp} vCPU," in summary.stdout
    assert ("when_tcg" in summary.stdout) == ("-accel tcg" in rendered.stdout)


# ---- 4. kvmlab's own words ------------------------------------------------------------------

NAME_RULE = "names are 1-32 lower-case letters, digits and '-', starting with a letter"
LONG_URI = "qemu+ssh://" + "a" * 3000 + "/system"
OWN_WORDS = {
    "name": ('name = "Bad"\n[guests.vm]\n', "name", f"'Bad' is not allowed here: {NAME_RULE}"),
    "network": (
        HEAD + 'nics = [{ type = "tap", network = "LAN" }]\n',
        "guests.vm.nics[0].network",
        f"'LAN' is not allowed here: {NAME_RULE}",
    ),
    "serial": (
        HEAD + 'disks = [{ path = "d.qcow2", serial = "a b" }]\n',
        "guests.vm.disks[0].serial",
        "'a b' is not allowed here: it takes letters, digits, '_', '.' and '-'",
    ),
    "nan": (
        'name = "x"\n[bench]\nduration = nan\n[guests.vm]\n',
        "bench.duration",
        "nan is not a number: give a number above 0 and at most 3600",
    ),
    "inf": (
        HEAD + "vcpus = inf\n",
        "guests.vm.vcpus",
        "inf is not a finite number: give a whole number from 1 to 288",
    ),
    "too-much": (
        'name = "x"\n[bench]\nduration = 3601\n[guests.vm]\n',
        "bench.duration",
        "3601 is out of range: give a number above 0 and at most 3600",
    ),
    "fraction": (
        HEAD + "vcpus = 1.5\n",
        "guests.vm.vcpus",
        "1.5 is not a whole number: give a whole number from 1 to 288",
    ),
    "long-uri": (
        HEAD + f'libvirt_uri = "{LONG_URI}"\n',
        "guests.vm.libvirt_uri",
        f"'{LONG_URI[:60]}...' (3018 characters) is too long: a libvirt URI here takes at "
        "most 1024 characters",
    ),
    "long-bad-uri": (
        f'name = "x"\n[libvirt]\nuri = "{"x" * 1000}"\n[guests.vm]\n',
        "libvirt.uri",
        f"'{'x' * 60}...' (1000 characters) is not a libvirt URI of the QEMU driver's system "
        "instance (for example qemu:///system, qemu+ssh://user@host/system, "
        "qemu+tcp://127.0.0.1:16509/system)",
    ),
    "long-host": (
        HEAD + f'libvirt_uri = "qemu+ssh://{"h" * 300}/system"\n',
        "guests.vm.libvirt_uri",
        f"'qemu+ssh://{'h' * 49}...' (318 characters): its host name has 300 characters; a "
        "host name has at most 253",
    ),
    "long-key": (
        HEAD + f"{'k' * 3000} = 1\n",
        f"guests.vm.{'k' * 48}...",
        "unknown key",
    ),
}


@pytest.mark.parametrize("case", sorted(OWN_WORDS))
def test_refusals_are_in_kvmlabs_words(case: str, tmp_path: Path) -> None:
    text, key, message = OWN_WORDS[case]
    lab, line = refused(tmp_path, text)
    assert line == f"kvmlab: {lab}: {key}: {message}"
    assert len(line) < 400 + len(str(lab))


def test_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    """Notepad and other editors start UTF-8 with a BOM: it carries no content, so the file
    means what it says without it (a BOM elsewhere is still a syntax error)."""
    lab = tmp_path / "lab.toml"
    lab.write_bytes(b"\xef\xbb\xbf" + HEAD.encode())
    proc = check(lab)
    assert proc.returncode == 0, proc.stderr
    assert load_lab(lab).digest == hashlib.sha256(lab.read_bytes()).hexdigest()
    _, line = refused(tmp_path, HEAD + "\ufeffvcpus = 2\n")
    assert "line 3, column 1: TOML syntax" in line


def test_every_pattern_of_the_models_is_said_in_words() -> None:
    from kvmlab.spec.messages import PATTERNS

    patterns: set[str] = set()
    todo: list[type[BaseModel]] = [Lab]
    seen: set[type[BaseModel]] = set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for field in model.model_fields.values():
            patterns.update(str(m.pattern) for m in field.metadata if getattr(m, "pattern", None))
            todo.extend(_models_in(field.annotation))
    assert patterns and patterns <= set(PATTERNS), patterns - set(PATTERNS)


def _models_in(tp: object) -> list[type[BaseModel]]:
    import typing

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models_in(arg)]


# ---- 5. no control character in a path -----------------------------------------------------

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
