"""Every key of every lab-file table, given each kind of value a careless or hostile author
writes: -1, 0, huge integers (beyond 64 bits, beyond the 4300 digits
Python prints), floats, nan and inf, booleans, text with escapes, newlines and bidi
controls, 300-character names, arrays, tables, dates and times. The lab is refused with
lines in kvmlab's words (no pydantic phrasing, no Python limit message, one line each,
short) or taken; nothing else escapes. Plus the cases this pass found and fixed: a MAC
with a trailing newline, unbounded counts QEMU cannot take, vCPU pinning keys that are not
ASCII numbers, CPU model names that are not ASCII, mount points that are not. Nothing
boots."""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from kvmlab.errors import SpecError
from kvmlab.spec import devices, guest_kvm, machine, parse_lab
from kvmlab.spec.backend import LibvirtSpec
from kvmlab.spec.bench import BenchSpec
from kvmlab.spec.lab import Guest, HostView, Lab
from kvmlab.spec.load import validate_lab
from kvmlab.spec.migration import MigrationSpec
from kvmlab.spec.network import NetCompareSpec, NetworkSpec
from kvmlab.spec.switch import PvpSpec, SwitchSpec, TuningSpec

Raw = dict[str, Any]


def lab(guest: Raw | None = None, **top: Any) -> Raw:
    return {"name": "x", "guests": {"vm": guest or {}}, **top}


def nic(kind: str, extra: Raw) -> Raw:
    shared = {"memory": {"backing": "memfd", "shared": True}} if kind == "vhost-user" else {}
    return lab({**shared, "nics": [{"type": kind, **extra}]})


WHERE: dict[type[BaseModel], Callable[[str, Any], Raw]] = {
    Lab: lambda k, v: lab(**{k: v}),
    Guest: lambda k, v: lab({k: v}),
    machine.Cpu: lambda k, v: lab({"cpu": {k: v}}),
    machine.Memory: lambda k, v: lab({"memory": {k: v}}),
    machine.NumaCell: lambda k, v: lab({"memory": {"numa": [{"cpus": "0", "memory": "1G", k: v}]}}),
    machine.Pinning: lambda k, v: lab({"pinning": {k: v}}),
    machine.Timer: lambda k, v: lab({"clock": {"timers": {"rtc": {k: v}}}}),
    machine.Timers: lambda k, v: lab({"clock": {"timers": {k: v}}}),
    machine.Clock: lambda k, v: lab({"clock": {k: v}}),
    machine.HyperV: lambda k, v: lab({"hyperv": {k: v}}),
    devices.Disk: lambda k, v: lab({"disks": [{"path": "d.qcow2", k: v}]}),
    devices.CloudInit: lambda k, v: lab(
        {"boot": "disk", "disks": [{"path": "d.qcow2"}], "cloud_init": {k: v}}
    ),
    devices.Forward: lambda k, v: nic(
        "user", {"forwards": [{"host_port": 2222, "guest_port": 22, k: v}]}
    ),
    devices.UserNic: lambda k, v: nic("user", {k: v}),
    devices.TapNic: lambda k, v: nic("tap", {k: v}),
    devices.VhostUserNic: lambda k, v: nic("vhost-user", {"socket": "/run/s.sock", k: v}),
    guest_kvm.GuestKvm: lambda k, v: lab({"nested": True, "kvm": {k: v}}),
    HostView: lambda k, v: lab({"host_view": {k: v}}),
    LibvirtSpec: lambda k, v: lab(libvirt={k: v}),
    BenchSpec: lambda k, v: lab(bench={k: v}),
    PvpSpec: lambda k, v: lab(bench={"pvp": {k: v}}),
    NetCompareSpec: lambda k, v: lab(bench={"netcompare": {k: v}}),
    SwitchSpec: lambda k, v: lab(switch={"kind": "ovs-dpdk", k: v}),
    NetworkSpec: lambda k, v: lab(networks={"n": {k: v}}),
    TuningSpec: lambda k, v: lab(tuning={k: v}),
    MigrationSpec: lambda k, v: lab(
        {"migratable": True}, migrations=[{"name": "m", "guest": "vm", k: v}]
    ),
}

VALUES: list[Any] = [
    True,
    False,
    -1,
    0,
    1,
    2**63,
    10**40,
    16**1200,  # 1446 digits: Python prints it
    16**3700,  # 4456 digits: Python refuses to print it
    -(16**3700),
    [16**3700],
    1.5,
    2.0,
    1e308,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "-1",
    "é",
    "\x1b[2J",
    "a\u202eb",
    "a\nb",
    "\x00",
    "a" * 300,
    "/" + "a" * 300,
    [],
    [{}],
    {},
    {"a": 1},
    datetime.date(2024, 1, 1),
    datetime.datetime(2024, 1, 1, 7, 32),
    datetime.time(7, 32),
]
PYDANTIC = ("Input should", "Value error", "valid dictionary", "instance of", "[type=")
PYTHON = ("Exceeds the limit", "int_max_str_digits", "Traceback")


def shown(value: Any) -> str:
    """A test value for a failure message (Python does not print an int of 4456 digits)."""
    if isinstance(value, list):
        return f"[{', '.join(shown(v) for v in value)}]"
    if isinstance(value, int) and abs(value) > 10**100:
        return f"<an integer of {value.bit_length()} bits>"
    return repr(value)[:40]


@pytest.mark.parametrize("model", list(WHERE), ids=[m.__name__ for m in WHERE])
def test_every_key_refuses_every_wrong_value_in_words(model: type[BaseModel]) -> None:
    for key in model.model_fields:
        for value in VALUES:
            try:
                validate_lab(WHERE[model](key, value), "lab.toml")
            except SpecError as exc:
                for line in exc.lines():
                    said = f"{model.__name__}.{key} = {shown(value)}: {line}"
                    assert not any(p in line for p in (*PYDANTIC, *PYTHON)), said
                    assert "\n" not in line and len(line) < 400, said


PLAIN: dict[type[BaseModel], tuple[str, Any]] = {
    Lab: ("description", "d"),
    Guest: ("vcpus", 2),
    machine.Cpu: ("model", "max"),
    machine.Memory: ("size", "1G"),
    machine.NumaCell: ("mem_access", "private"),
    machine.Pinning: ("emulator", "0"),
    machine.Timer: ("tickpolicy", "catchup"),
    machine.Timers: ("rtc", {}),
    machine.Clock: ("offset", "utc"),
    machine.HyperV: ("features", ["relaxed"]),
    devices.Disk: ("readonly", True),
    devices.CloudInit: ("agent", True),
    devices.Forward: ("proto", "udp"),
    devices.UserNic: ("queues", 1),
    devices.TapNic: ("queues", 1),
    devices.VhostUserNic: ("queues", 1),
    guest_kvm.GuestKvm: ("nested", True),
    HostView: ("hide", ["/srv"]),
    LibvirtSpec: ("persistent", True),
    BenchSpec: ("warmup", 0),
    PvpSpec: ("loopback", True),
    NetCompareSpec: ("seconds", 5),
    SwitchSpec: ("queues", 1),
    NetworkSpec: ("subnet", "10.77.0.0/24"),
    TuningSpec: ("unmovable_irqs", "accept"),
    MigrationSpec: ("repetitions", 5),
}


@pytest.mark.parametrize("model", list(WHERE), ids=[m.__name__ for m in WHERE])
def test_each_place_is_a_valid_lab_with_a_plain_value(model: type[BaseModel]) -> None:
    """So that a refusal above is the value's, not the place's."""
    key, value = PLAIN[model]
    validate_lab(WHERE[model](key, value), "lab.toml")


HEAD = 'name = "x"\n[guests.vm]\n'
BEYOND = (
    "is beyond TOML's integers (64-bit, at most 19 digits): give the value the key takes "
    "('kvmlab check --explain')"
)
FOUND = {
    "nic-type-huge": (  # pydantic printed it as an "Exception ignored" traceback
        HEAD + "nics = [{ type = 0x" + "f" * 4000 + " }]\n",
        f"guests.vm.nics[0].type: a number of about 4817 digits {BEYOND}",
    ),
    "beyond-64-bits": (
        HEAD + "vcpus = 9223372036854775808\n",
        f"guests.vm.vcpus: 9223372036854775808 {BEYOND}",
    ),
    "mac-newline": (
        HEAD + 'nics = [{ type = "user", mac = "52:54:00:12:34:56\\n" }]\n',
        "guests.vm.nics[0].mac: '52:54:00:12:34:56\\n' is not a MAC address like "
        "'52:54:00:12:34:56'",
    ),
    "mac-number": (
        HEAD + 'nics = [{ type = "user", mac = 5 }]\n',
        "guests.vm.nics[0].mac: a MAC address is text: write it in quotes, like "
        "'52:54:00:12:34:56'",
    ),
    "spinlocks": (
        HEAD + "hyperv = { spinlock_retries = 0x100000000 }\n",
        "guests.vm.hyperv.spinlock_retries: 4294967296 is out of range: give a whole number "
        "from 4095 to 4294967295",
    ),
    "reconnect": (
        HEAD + 'memory = { backing = "memfd", shared = true }\n'
        'nics = [{ type = "vhost-user", socket = "/run/s", reconnect = 99999999999 }]\n',
        "guests.vm.nics[0].reconnect: 99999999999 is out of range: give a whole number from "
        "1 to 3600",
    ),
    "topology": (
        HEAD + "cpu = { sockets = 0x7fffffffffffffff }\n",
        "guests.vm.cpu.sockets: 9223372036854775807 is out of range: give a whole number from "
        "1 to 288",
    ),
    "pin-arabic-digit": (
        HEAD + 'vcpus = 2\npinning = { vcpus = { "\u0661" = "0" } }\n',
        "guests.vm.pinning.vcpus.\u0661: keys are vCPU numbers such as 0: write the vCPU's number",
    ),
    "pin-huge": (
        HEAD + 'vcpus = 2\npinning = { vcpus = { "' + "9" * 5000 + '" = "0" } }\n',
        "guests.vm.pinning.vcpus.999999999999...: vCPU of 5000 digits does not exist; the "
        "guest has 2 vCPU(s), numbered 0-1: pin those",
    ),
    "pin-twice": (
        HEAD + 'vcpus = 2\npinning = { vcpus = { "1" = "0", "01" = "1" } }\n',
        "guests.vm.pinning.vcpus.01: pins vCPU 1 again (also as '1'): pin each vCPU once",
    ),
    "cpu-model": (
        HEAD + 'cpu = { model = "\u00e9pyc" }\n',
        "guests.vm.cpu.model: '\u00e9pyc' is not a CPU model name: give one QEMU knows (e.g. "
        "'EPYC', 'Haswell-noTSX', 'max'): ASCII letters, digits, '-', '_' and '.', at most 64",
    ),
    "cpu-feature": (
        HEAD + 'cpu = { features = ["+v\u00b5x"] }\n',
        "guests.vm.cpu.features: '+v\u00b5x' is not a feature flag; write '+vmx' or '-svm'",
    ),
    "mount-root": (
        HEAD + 'disks = [{ path = "d.qcow2", mount = "/" }]\n',
        "guests.vm.disks[0].mount: '/' is not a folder to mount a disk on: give a normalised "
        "absolute path other than '/' (no '.', '..', '//' or trailing /), e.g. '/data'",
    ),
    "mount-dotdot": (
        HEAD + 'disks = [{ path = "d.qcow2", mount = "/data/../etc" }]\n',
        "guests.vm.disks[0].mount: '/data/../etc' is not a folder to mount a disk on: give a "
        "normalised absolute path other than '/' (no '.', '..', '//' or trailing /), e.g. "
        "'/data'",
    ),
    "memory-huge": (
        HEAD + "memory = 0x" + "f" * 4000 + "\n",
        f"guests.vm.memory: a number of about 4817 digits {BEYOND}",
    ),
    "emulator-huge": (
        HEAD + "pinning = { emulator = 0x" + "f" * 4000 + " }\n",
        f"guests.vm.pinning.emulator: a number of about 4817 digits {BEYOND}",
    ),
}


@pytest.mark.parametrize("case", sorted(FOUND))
def test_what_this_pass_found_is_refused(case: str) -> None:
    text, expected = FOUND[case]
    with pytest.raises(SpecError) as caught:
        parse_lab(text.encode(), "lab.toml")
    assert caught.value.lines() == [f"lab.toml: {expected}"]
