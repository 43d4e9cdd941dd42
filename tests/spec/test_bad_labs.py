"""Malformed labs: every problem is reported once, naming the key path and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvmlab.errors import SpecError
from kvmlab.spec import parse_lab

HEAD = 'name = "t"\n[guests.vm]\n'

CASES = [
    # (lab text after HEAD, expected key path, fragment of the message)
    ("vcpus = 'two'\n", "guests.vm.vcpus", "'two' is not a whole number: give"),
    ("vcpus = 0\n", "guests.vm.vcpus", "0 is out of range: give a whole number from 1 to 288"),
    ("vcpu = 2\n", "guests.vm.vcpu", "did you mean 'vcpus'"),
    ("machine = 'q36'\n", "guests.vm.machine", "'q36' is not one of 'q35'"),
    ("memory = '2X'\n", "guests.vm.memory.size", "not a size"),
    (
        "memory = { size = '2G', backing = 'hugepages', hugepage_size = '4M' }\n",
        "guests.vm.memory.hugepage_size",
        "not supported",
    ),
    (
        "memory = { size = '3M', backing = 'hugepages' }\n",
        "guests.vm.memory.size",
        "whole number of 2M huge pages",
    ),
    ("memory = { size = '1G', shared = true }\n", "guests.vm.memory.shared", "memfd"),
    (
        "vcpus = 2\npinning = { vcpus = { 5 = '1' } }\n",
        "guests.vm.pinning.vcpus.5",
        "vCPU 5 does not exist",
    ),
    (
        "vcpus = 2\n[guests.vm.memory]\nsize = '2G'\nnuma = [{ cpus = '0-2', memory = '2G' }]\n",
        "guests.vm.memory.numa[0].cpus",
        "do not exist",
    ),
    (
        "vcpus = 2\n[guests.vm.memory]\nsize = '2G'\nnuma = [{ cpus = '0-1', memory = '1G' }]\n",
        "guests.vm.memory.numa",
        "add up to 1G",
    ),
    ("vcpus = 2\ncpu = { sockets = 2, cores = 2 }\n", "guests.vm.cpu", "must match"),
    ("cpu = { features = ['vmx'] }\n", "guests.vm.cpu.features", "'+vmx'"),
    (
        "vcpus = 1\nnics = [{ type = 'tap', queues = 4 }]\n",
        "guests.vm.nics[0].queues",
        "at most 2 x vCPUs",
    ),
    (
        "nics = [{ type = 'user', queues = 2 }]\nvcpus = 2\n",
        "guests.vm.nics[0].queues",
        "single queue",
    ),
    (
        "nics = [{ type = 'vhost-user', socket = '/tmp/s' }]\n",
        "guests.vm.nics[0]",
        "vhost-user needs guest RAM the switch can map",
    ),
    ("nics = [{ type = 'bogus' }]\n", "guests.vm.nics[0]", "'bogus'"),
    (
        "nics = [{ type = 'user', mac = '52:54:00:00:00:01' }, "
        "{ type = 'user', mac = '52:54:00:00:00:01' }]\n",
        "guests.vm.nics[1].mac",
        "already used by guests.vm.nics[0].mac",
    ),
    (
        "nics = [{ type = 'user', rx_queue_size = 300 }]\n",
        "guests.vm.nics[0].rx_queue_size",
        "256, 512 or 1024",
    ),
    (
        "nics = [{ type = 'tap', tx_queue_size = 512 }]\n",
        "guests.vm.nics[0].tx_queue_size",
        "vhost-user",
    ),
    (
        "nics = [{ type = 'user', mac = '01:00:5e:00:00:01' }]\n",
        "guests.vm.nics[0].mac",
        "multicast",
    ),
    (
        "disks = [{ path = 'a.qcow2', cache = 'writeback', aio = 'native' }]\n",
        "guests.vm.disks[0].aio",
        "needs cache",
    ),
    (
        "disks = [{ path = 'a.qcow2' }, { path = 'a.qcow2' }]\n",
        "guests.vm.disks[1].path",
        "already used",
    ),
    ("disks = [{ file = 'a.qcow2' }]\n", "guests.vm.disks[0].path", "required key is missing"),
    ("boot = 'kernel'\n", "guests.vm.kernel", "needs the kernel"),
    ("initrd = 'initrd.img'\n", "guests.vm.initrd", 'only used with boot = "kernel"'),
    ("boot = 'disk'\n", "guests.vm.boot", "needs at least one disk"),
    (
        "machine = 'microvm'\nboot = 'disk'\ndisks = [{ path = 'a.qcow2' }]\n",
        "guests.vm.boot",
        "microvm",
    ),
    (
        "[guests.vm.clock.timers.hpet]\ntickpolicy = 'catchup'\n",
        "guests.vm.clock.timers.hpet.tickpolicy",
        "not supported for hpet",
    ),
    (
        "accel = 'tcg'\n[guests.vm.clock.timers.kvmclock]\npresent = true\n",
        "guests.vm.clock.timers.kvmclock.present",
        "needs KVM",
    ),
    (
        "[guests.vm.hyperv]\nfeatures = ['synic']\n",
        "guests.vm.hyperv.features",
        "'synic' needs vpindex",
    ),
    ("[guests.vm.guests.inner]\n", "guests.vm.guests", "nested = true"),
    (
        "nested = true\nmemory = '1G'\n[guests.vm.guests.inner]\nmemory = '1G'\n",
        "guests.vm.memory.size",
        "cannot hold",
    ),
]


@pytest.mark.parametrize(("body", "key", "fragment"), CASES, ids=[c[1] for c in CASES])
def test_problem_names_key_and_reason(body: str, key: str, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_lab((HEAD + body).encode(), "lab.toml")
    lines = caught.value.lines()
    matching = [line for line in lines if line.startswith(f"lab.toml: {key}: ")]
    assert matching, f"no problem at {key}: {lines}"
    assert any(fragment in line for line in matching), lines


def test_every_problem_is_reported_at_once() -> None:
    body = "vcpus = 'x'\nmachine = 'q36'\nbogus = 1\n"
    with pytest.raises(SpecError) as caught:
        parse_lab((HEAD + body).encode(), "lab.toml")
    keys = sorted(p.path for p in caught.value.problems)
    assert keys == ["guests.vm.bogus", "guests.vm.machine", "guests.vm.vcpus"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"", "the file is empty"),
        (b"   \n# only a comment\n", "the file is empty"),
        (b"name = \n", "TOML syntax"),
        (b"\xff\xfe", "not UTF-8"),
        (b'name = "t"\n', "guests: required key is missing"),
        (b'name = "t"\nguests = {}\n', "guests: has 0 entries; it takes at least 1"),
        (b'name = "Bad Name"\n[guests.vm]\n', "name: 'Bad Name' is not allowed here: names are"),
        (b'name = "t"\n[guests.Vm]\n', "guests.Vm: 'Vm' is not a valid name"),
    ],
)
def test_file_level_problems(text: bytes, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_lab(text, "lab.toml")
    assert any(fragment in line for line in caught.value.lines()), caught.value.lines()


def test_syntax_error_names_line_and_column() -> None:
    with pytest.raises(SpecError) as caught:
        parse_lab(b'name = "t"\n[guests.vm]\nvcpus = = 2\n', "lab.toml")
    (line,) = caught.value.lines()
    assert line.startswith("lab.toml: line 3, column 9: TOML syntax:")


def test_good_lab_has_expected_defaults() -> None:
    lab = parse_lab(b'name = "t"\n[guests.vm]\n', "lab.toml")
    vm = lab.guests["vm"]
    assert (vm.machine, vm.accel, vm.vcpus, vm.memory.size) == ("q35", "auto", 1, 1 << 30)
    assert vm.cpu.model == "host-passthrough"
    assert vm.nics == [] and vm.disks == []


@pytest.mark.parametrize("uri", ["http://h/system", "qemu:///nowhere", "qemu+ssh://h/system;x"])
def test_libvirt_uri_is_checked(tmp_path: Path, uri: str) -> None:
    from kvmlab.errors import SpecError
    from kvmlab.spec import load_lab

    lab = tmp_path / "lab.toml"
    lab.write_text(f'name = "x"\nbackend = "libvirt"\n[libvirt]\nuri = "{uri}"\n[guests.vm]\n')
    with pytest.raises(SpecError, match=r"libvirt\.uri"):
        load_lab(lab)
