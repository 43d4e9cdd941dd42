"""``runtime/lab.py`` bringing labs up and down, on stub guests (no VM, a second or less
each): two guests, a guest hypervisor with a guest inside, ``down``, a guest failing at
boot and Ctrl-C during ``up``, each leaving nothing behind (the fixture checks that no
process of theirs survives)."""

from __future__ import annotations

import time

import pytest

from kvmlab.errors import StateError, UsageError
from kvmlab.guest.agent import GuestAgent
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.transports import transport_for
from kvmlab.migrate.transports.base import Route
from kvmlab.render.runfiles import AGENT_SOCKET
from kvmlab.runtime import backends
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.machine import LaunchFailure, MachineState
from kvmlab.runtime.rundir import LabDir
from tests.fakebackend.backend import StubBackend
from tests.fakebackend.conftest import StubLabs
from tests.fakebackend.machine import StubMachine


def test_two_guests_come_up_detached_and_down_stops_them(stub_labs: StubLabs) -> None:
    loaded = stub_labs.lab("pair", {"vm1": {}, "vm2": {}})
    machines = labrun.up(loaded, stub_labs.launch())
    assert [m.config.name for m in machines] == ["pair/vm1", "pair/vm2"]
    assert all(m.detached and m.state is MachineState.RUNNING for m in machines)
    assert all(set(m.boot) >= {"qemu", "total"} for m in machines)
    entries = list(LabDir.of("pair").entries())
    assert [(e.name, e.state()) for e in entries] == [
        ("pair/vm1", "running"),
        ("pair/vm2", "running"),
    ]
    assert all(e.record is not None and e.record.backend == "stub" for e in entries)
    with pytest.raises(StateError, match="already up"):
        labrun.up(loaded, stub_labs.launch())  # nothing of the first up is touched
    # another command finds the guest by its record alone, and reaches its agent
    entry = entries[1]
    assert entry.record is not None
    guest = backends.attach(entry.run_dir, entry.record)
    assert isinstance(guest, StubMachine), "attached as the backend on record"
    done = guest.exec(["sh", "-c", "echo hi; pwd"], timeout=10)
    assert done.stdout.decode().splitlines() == ["hi", str(guest.root)]
    assert labrun.down("pair") == ["pair/vm1", "pair/vm2"]
    assert not LabDir.of("pair").exists()
    assert not any(m.is_alive() for m in machines)


def test_a_guest_hypervisor_starts_its_guest_with_kvmlab_inside_and_stops_it_first(
    stub_labs: StubLabs,
) -> None:
    """The L1 runs ``kvmlab up --within l1`` through its agent (this kvmlab, with the stub
    registered), and L0 records the L2 it started, reachable through its relay."""
    loaded = stub_labs.lab("nest", {"l1": {"nested": "true", "memory": '"512M"'}, "l1/l2": {}})
    [l1] = labrun.up(loaded, stub_labs.launch())
    entries = {e.name: e for e in LabDir.of("nest").entries()}
    assert list(entries) == ["nest/l1", "nest/l1/l2"]
    l2 = entries["nest/l1/l2"].record
    assert l2 is not None and l2.via == "l1" and l2.pid == l1.pid
    relay = entries["nest/l1/l2"].run_dir / AGENT_SOCKET
    assert relay.resolve() == l1.relay_socket("l2")
    with GuestAgent(relay) as agent:  # L2's own agent, through the relay
        agent.wait_ready(10)
        assert agent.exec(["sh", "-c", "echo inner"], timeout=10).stdout == b"inner\n"
    inner_root = l1.relay_socket("l2").parents[2]  # the run root of the kvmlab inside
    assert [p.name for p in (inner_root / "nest").iterdir() if p.is_dir()] == ["l2"]
    assert labrun.down("nest") == ["nest/l1"]
    assert not LabDir.of("nest").exists()


def test_a_guest_failing_at_boot_leaves_nothing_behind(stub_labs: StubLabs) -> None:
    loaded = stub_labs.lab("fails", {"vm1": {}, "vm2": {}})
    backend = StubBackend(fail_boot={"vm2"})
    with pytest.raises(LaunchFailure) as failed:
        labrun.up(loaded, stub_labs.launch(backend))
    lines = failed.value.lines()
    assert lines[0] == "fails/vm2: its stub guest exited while booting"
    assert "  exit code: 3" in lines and any("Kernel panic" in line for line in lines)
    vm1, vm2 = backend.made
    assert vm1.state is MachineState.STOPPED and not vm1.is_alive()
    assert vm2.state is MachineState.STOPPED  # failed, then stopped with the others
    assert not LabDir.of("fails").exists()  # the run state went with them


def test_ctrl_c_while_a_guest_boots_stops_the_others_and_removes_the_lab(
    stub_labs: StubLabs,
) -> None:
    loaded = stub_labs.lab("stop", {"vm1": {}, "vm2": {}, "vm3": {}})
    backend = StubBackend(interrupt={"vm2"})
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        labrun.up(loaded, stub_labs.launch(backend))
    assert [m.config.name for m in backend.made] == ["stop/vm1", "stop/vm2"]  # vm3: never
    assert not any(m.is_alive() for m in backend.made)
    assert not LabDir.of("stop").exists()
    assert time.monotonic() - started < 10


def test_the_stub_is_one_more_backend_for_what_acts_on_records(stub_labs: StubLabs) -> None:
    """Registered by one line, the stub is a backend like the others: chosen by name,
    attached by record, asked for its capabilities (never for its class)."""
    from kvmlab.cli.backend_opts import BackendOptions, choose_backend

    loaded = stub_labs.lab("named", {"vm": {}})
    backend = choose_backend(loaded, BackendOptions(backend="stub"))
    assert backend.name == "stub" and not backend.capabilities.migrate_lab
    assert "stub" in backends.names()
    [machine] = labrun.up(loaded, stub_labs.launch())
    try:
        record = machine.record()
        attached = backends.attach(machine.run_dir, record)
        assert type(attached) is StubMachine and attached.state is MachineState.RUNNING
        assert attached.monitor().execute("query-status") == {
            "status": "running",
            "running": True,
        }
        monitor = attached.monitor()
        monitor.add_forward("net0", "udp:127.0.0.1:5000-:7777")
        assert monitor.forwarding("5000") and not monitor.forwarding("7777")
        with pytest.raises(UsageError, match="stub backend, which kvmlab migrates no guest"):
            transport_for(machine.run_dir, record, Settings(), Route())
    finally:
        labrun.down("named")
