"""Every refusal of a lab file is one line in kvmlab's own words: no regex, no pydantic
phrasing, no 3000-character value echoed, every pattern of the models said in words; a
byte order mark is skipped. ``check`` runs as a user would; nothing boots."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pydantic import BaseModel

from kvmlab.spec import Lab, load_lab
from tests.spec.labcheck import FWD, HEAD, check, refused

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


@pytest.mark.parametrize("addr", ["localhost", "0.0.0.0/0", "127.1x"])
def test_a_host_addr_that_is_not_an_address_is_said_in_kvmlabs_words(
    tmp_path: Path, addr: str
) -> None:
    nic = FWD.format(addr=f', host_addr = "{addr}"')
    _, line = refused(tmp_path, f"{HEAD}nics = [{nic}]\n")
    assert line.endswith(f"host_addr: {addr!r} is not an IPv4 address (like 127.0.0.1)"), line
