"""The registry maps a record's backend to the class that runs it; the contract's life
cycle is the same for both (a record in, the same record out)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from kvmlab.errors import StateError
from kvmlab.runtime import backends
from kvmlab.runtime.libvirt.conn import LibvirtFailure
from kvmlab.runtime.libvirt.machine import LibvirtMachine
from kvmlab.runtime.machine import Machine, MachineState
from kvmlab.runtime.qemu.machine import QemuMachine
from kvmlab.runtime.rundir import GuestRecord, LabDir


def record(**extra: Any) -> GuestRecord:
    base: dict[str, Any] = {
        "lab": "lab",
        "address": ["vm"],
        "pid": 0,
        "argv": ["qemu-system-x86_64"],
        "accel": "tcg",
        "accel_reason": "test",
        "vcpus": 1,
        "memory": 512,
        "started": 1.0,
    }
    return GuestRecord(**{**base, **extra})


def test_each_backend_attaches_as_its_own_class(tmp_path: Path) -> None:
    qemu = backends.attach(tmp_path, record())
    assert type(qemu) is QemuMachine and qemu.state is MachineState.STOPPED
    fields = {"uri": "qemu:///system", "domain": "u", "token": "t"}
    lv = backends.attach(tmp_path, record(backend="libvirt", backend_fields=fields))
    assert type(lv) is LibvirtMachine
    assert isinstance(qemu, Machine) and isinstance(lv, Machine)
    saved = lv.record()
    assert saved.backend == "libvirt"
    assert saved.backend_fields == {**fields, "persistent": False, "serial_log": ""}
    assert qemu.record().backend == "qemu"


def test_an_unknown_backend_on_record_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="unknown guest backend 'xen'"):
        backends.attach(tmp_path, record(backend="xen"))


def test_a_libvirt_guest_lends_its_monitor_through_libvirt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QMP and HMP through virDomainQemuMonitorCommand (what the migration transport
    samples with, and what the contract's port forwards go through)."""
    import libvirt_qemu

    sent: list[tuple[object, str, int]] = []

    def passthrough(dom: object, text: str, flags: int) -> str:
        sent.append((dom, text, flags))
        if flags:
            return "Hub 0 (#net0):\n  Protocol[State]    FD  Source Address  Port   Dest\n"
        if "query-status" in text:
            return json.dumps({"return": {"status": "running", "running": True}})
        return json.dumps({"error": {"class": "CommandNotFound", "desc": "no such command"}})

    monkeypatch.setattr(libvirt_qemu, "qemuMonitorCommand", passthrough)
    lv = backends.attach(
        tmp_path, record(backend="libvirt", backend_fields={"uri": "test:///default"})
    )
    dom = object()
    assert isinstance(lv, LibvirtMachine)
    lv._dom = dom
    monitor = lv.monitor()
    assert monitor.execute("query-status") == {"status": "running", "running": True}
    assert sent[-1] == (dom, '{"execute": "query-status"}', 0)
    monitor.add_forward("kvnet0", "udp:127.0.0.1:5000-:7777")
    assert sent[-1][1:] == (
        "hostfwd_add kvnet0 udp:127.0.0.1:5000-:7777",
        libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP,
    )
    assert not monitor.forwarding("5000")
    with pytest.raises(LibvirtFailure, match="QMP query-nothing: no such command"):
        monitor.execute("query-nothing")
    assert lv.capabilities.monitor and not lv.capabilities.exit_counters


def test_the_contract_cannot_be_instantiated_half_done() -> None:
    class Half(Machine):  # implements none of the hooks
        pass

    with pytest.raises(TypeError, match="abstract"):
        Half(QemuMachine.from_record(Path("/nonexistent"), record()).config)  # type: ignore[abstract]


def test_a_record_from_before_the_backend_sub_record_still_reads(tmp_path: Path) -> None:
    """A guest brought up by the previous kvmlab (libvirt fields at the top level) is
    still found, stopped and migrated by this one."""
    old = {
        **asdict(record()),
        "backend": "libvirt",
        "uri": "qemu:///system",
        "domain": "u",
        "token": "t",
        "persistent": True,
        "serial_log": None,
    }
    del old["backend_fields"]
    (tmp_path / "guest.json").write_text(json.dumps(old))
    read = GuestRecord.read(tmp_path)
    assert read.backend_fields == {
        "uri": "qemu:///system",
        "domain": "u",
        "token": "t",
        "persistent": True,
    }
    machine = backends.attach(tmp_path, read)
    assert isinstance(machine, LibvirtMachine) and machine.uri == "qemu:///system"
    assert machine.persistent and machine.uuid == "u" and machine.token == "t"


def test_a_record_whose_backend_fields_are_not_a_table_is_refused(tmp_path: Path) -> None:
    bad = {**asdict(record()), "backend_fields": ["uri"]}
    (tmp_path / "guest.json").write_text(json.dumps(bad))
    with pytest.raises(
        StateError, match=r"its backend_fields is \[.uri.\], not a value kvmlab writes"
    ):
        GuestRecord.read(tmp_path)


def test_a_record_naming_an_unknown_backend_is_unreadable_not_a_crash(run_root: Path) -> None:
    """ps and down treat it like any unreadable record (its QEMU found by its run
    directory), instead of failing on the registry's refusal; the registry says so to
    whoever acts on the record."""
    with LabDir.of("lab").locked():
        run_dir = LabDir.of("lab").create_guest_dir(["vm"])
    (run_dir / "guest.json").write_text(json.dumps({**asdict(record()), "backend": "xen\x1b"}))
    [entry] = LabDir.of("lab").entries()
    assert entry.record is None and entry.state() == "unreadable"
    assert entry.problem is not None and "names no backend kvmlab has (xen\\x1b)" in entry.problem
    with pytest.raises(StateError, match="names no backend kvmlab has"):
        backends.running(GuestRecord.read(run_dir), run_dir)
