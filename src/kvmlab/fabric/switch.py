"""The lab's vswitch: started before the guests, stopped after them, on record in between.

It lives in ``LAB/.switch`` (private, kvmlab's marker): the ports' sockets, its logs and
``switch.json`` (kind, ports, every process with its start time, the huge pages kvmlab
reserved for it). ``kvmlab down`` stops a switch left running by ``kvmlab up`` or by a
kvmlab that was killed (as it stops such a kvmlab's guests), and gives its huge pages back;
a switch whose processes died is cleaned up with the lab's other stale state. Every
switch also has kvmlab's own two ports, ``kvmlab-gen`` and ``kvmlab-sink``, where the PVP
benchmark's generator and sink connect.

Kinds: ``testpmd`` (one process, typed at through a FIFO; its ports are socket servers)
and ``ovs-dpdk`` (a private ovsdb-server and ovs-vswitchd; its ports are socket clients).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kvmlab.bounded import read_at_most
from kvmlab.errors import RuntimeFailure, StateError
from kvmlab.fabric import hugepages, namespaces, ovs
from kvmlab.fabric.ovs import Ovs
from kvmlab.fabric.testpmd import TestPmd
from kvmlab.proc.confined import create_owned, remove_owned, write_private
from kvmlab.proc.processes import alive, terminate
from kvmlab.proc.signals import deferred_signals
from kvmlab.render.dpdk import TESTPMD, Port, switch_argv
from kvmlab.spec.lab import Lab
from kvmlab.spec.names import is_name
from kvmlab.spec.rules import switch_ports
from kvmlab.spec.switch import SwitchSpec

SWITCH_DIR = ".switch"
SWITCH_DIRS = (SWITCH_DIR, ".loopback")
"""Where a lab's switches live: the lab's own, and the PVP loopback's (no guest)."""
SWITCH_NAMES = {SWITCH_DIR: "switch", ".loopback": "loopback"}
"""The name each switch runs under (its processes' prefix, its namespace's part)."""
RECORD = "switch.json"
GEN_PORT, SINK_PORT = "kvmlab-gen", "kvmlab-sink"
READY_SECONDS = 60.0
"""How long a switch may take to set up its ports (DPDK's memory init under load)."""


@dataclass
class SwitchRecord:
    """What ``kvmlab down`` (or the next kvmlab) needs to stop a switch it did not start."""

    kind: str
    ports: list[str]
    processes: list[tuple[str, int, int | None]] = field(default_factory=list)
    """(program, pid, start time)."""
    hugepages: tuple[int, int] | None = None
    """``nr_hugepages`` before and after kvmlab reserved pages for the switch."""
    netns: str | None = None
    """The network namespace kvmlab created for OVS's datapath devices."""
    main_core: int | None = None
    """The switch's control CPU (where kvmlab's own traffic processes poll); None in a
    record of an older kvmlab."""
    cores: list[int] = field(default_factory=list)
    """Its forwarding CPUs."""


def lab_ports(lab: Lab) -> list[str]:
    """The switch's ports in order: the generator, the PVP guest's two, the sink, then every
    other guest port. The switch forwards between neighbours (0-1, 2-3, ...), so packets
    go generator -> guest NIC 0 and guest NIC 1 -> sink. The PVP guest's two are ports
    without an address (an addressed one is for guest-to-guest traffic)."""
    guest_ports = [(name, [n.port for _, n in switch_ports(g)]) for name, g in lab.guests.items()]
    dpdk = [
        (name, [n.port for _, n in switch_ports(g) if n.address is None])
        for name, g in lab.guests.items()
    ]  # an addressed port stays with the kernel
    chosen = lab.bench.pvp.guest or next((n for n, p in dpdk if len(p) >= 2), None)
    pvp = next((p[:2] for n, p in dpdk if n == chosen and len(p) >= 2), [])
    rest = [p for _, ports in guest_ports for p in ports if p not in pvp]
    order = [GEN_PORT, *pvp, SINK_PORT, *rest] if pvp else [*rest, GEN_PORT, SINK_PORT]
    return [p for p in order if p is not None]


class Switch:
    """A switch of one lab (either kind), a context manager that stops it."""

    def __init__(
        self, lab: str, spec: SwitchSpec, root: Path, ports: Sequence[str], name: str = "switch"
    ) -> None:
        self.lab = lab
        self.spec = spec
        self.dir = root
        self.ports = list(ports)
        self.name = name
        self.process: TestPmd | None = None
        self.ovs: Ovs | None = None
        self.reserved: hugepages.Reservation | None = None
        self.netns: str | None = None

    @property
    def kind(self) -> str:
        """``testpmd`` or ``ovs-dpdk``."""
        return self.spec.kind

    def socket(self, port: str) -> Path:
        """A port's vhost-user socket."""
        return self.dir / f"{port}.sock"

    @property
    def serves_sockets(self) -> bool:
        """Whether the switch listens on its ports' sockets (testpmd) or connects (OVS)."""
        return self.kind == "testpmd"

    def start(self, outlive: bool = False) -> None:
        """Create the directory, reserve huge pages if it needs them, start the switch; a
        testpmd switch has every port's socket listening when this returns."""
        if self.kind == "testpmd" and shutil.which(TESTPMD) is None:
            raise RuntimeFailure(f"{TESTPMD} not found: apt-get install dpdk-dev (make deps does)")
        if self.kind == "ovs-dpdk":
            ovs.require()  # before anything exists: nothing half-done
        create_owned(self.dir, f"switch of lab {self.lab}")
        for port in self.ports:
            if self.socket(port).exists():
                raise StateError(f"{self.socket(port)} is in use by another switch")
        with deferred_signals():  # reserved and on record, or neither
            if self.kind == "ovs-dpdk" or self.spec.hugepages:
                self.reserved = hugepages.reserve(self.spec.memory, f"the {self.kind} switch")
            self._record()
        try:
            if self.kind == "testpmd":
                self._start_testpmd(outlive)
            else:
                ns = namespaces.ns_name(self.lab, self.name)
                if namespaces.exists(ns):
                    namespaces.create(ns)  # refuses, saying whose it may be
                with deferred_signals():  # on record before it exists
                    self.netns = ns
                    self._record()
                    namespaces.create(ns)
                self.ovs = Ovs(self.dir, on_spawn=self._record, netns=ns)
                self.ovs.start(
                    self.spec,
                    [(p, self.socket(p)) for p in self.ports],
                    f"kvmlab-{self.lab}-{self.name}",
                )
        finally:
            self._record()

    def _start_testpmd(self, outlive: bool) -> None:
        ports = [Port(p, self.socket(p)) for p in self.ports]
        prefix = f"kvmlab-{self.lab}-{self.name}"
        self.process = TestPmd(self.name, switch_argv(self.spec, prefix, ports), self.dir)
        self.process.start(READY_SECONDS, outlive=outlive, on_spawn=self._record)
        deadline = time.monotonic() + 10
        missing = [p for p in self.ports if not self.socket(p).exists()]
        while missing and time.monotonic() < deadline:
            time.sleep(0.05)
            missing = [p for p in self.ports if not self.socket(p).exists()]
        if missing:
            raise RuntimeFailure(f"{self.name}: no socket for port(s) {', '.join(missing)}")
        self.process.command("start")

    def _processes(self) -> list[tuple[str, int, int | None]]:
        if self.process is not None and self.process.pid:
            return [(self.name, self.process.pid, self.process.started)]
        return list(self.ovs.pids) if self.ovs is not None else []

    def _record(self) -> None:
        res = self.reserved
        record = SwitchRecord(
            self.kind,
            self.ports,
            self._processes(),
            (res.before, res.after) if res and res.changed else None,
            self.netns,
            self.spec.main_core,
            list(self.spec.cores),
        )
        write_private(self.dir / RECORD, json.dumps(asdict(record), indent=2))

    @classmethod
    def attached(cls, lab: str, spec: SwitchSpec, root: Path) -> Switch:
        """The running switch of a lab that is up (:class:`StateError` when there is none)."""
        record = read_record(root)
        if record is None or not running(record, root):
            raise StateError(f"lab {lab} has no running switch")
        sw = cls(lab, spec, root, record.ports)
        if record.kind == "testpmd":
            _, pid, started = record.processes[0]
            sw.process = TestPmd.attach(sw.name, root, pid, started)
        else:
            sw.ovs = Ovs(root, record.processes, netns=record.netns)
            sw.netns = record.netns
        return sw

    def counters(self) -> str:
        """Every port's counters as the switch prints them (testpmd: port and forwarding
        statistics; OVS: ``ovs-ofctl dump-ports``)."""
        if self.ovs is not None:
            return self.ovs.dump_ports()
        if self.process is None or not self.process.running():
            raise RuntimeFailure(
                f"the {self.name} of lab {self.lab} is not running "
                f"(its log: {self.dir / (self.name + '.log')})"
            )
        return self.process.command("show port stats all") + self.process.command(
            "show fwd stats all"
        )

    def stop(self) -> None:
        """Stop the processes, give back the huge pages, remove the directory (kept, with
        the record, when a process would not stop)."""
        try:
            if self.process is not None:
                self.process.stop()
            if self.ovs is not None:
                self.ovs.stop()
            if self.netns is not None:
                namespaces.delete(self.netns)
                self.netns = None
        finally:
            if self.reserved is not None:
                with deferred_signals():  # given back and off the record, or neither
                    hugepages.release(self.reserved)
                    self.reserved = None
                    if self.dir.exists():
                        self._record()
        remove_owned(self.dir)

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_record(root: Path) -> SwitchRecord | None:
    """The record of the switch in ``root``, checked like any input: None when there is
    none, or when it is not a record kvmlab writes (nothing in it is then acted on: no
    process is signalled, no huge page given back)."""
    try:
        fd = os.open(root / RECORD, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = read_at_most(fd, MAX_RECORD_BYTES) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return _checked(data)
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


MAX_RECORD_BYTES = 64 << 10
PROGRAMS = frozenset({*SWITCH_NAMES.values(), "ovsdb-server", "ovs-vswitchd-dpdk"})
"""The names a switch record gives its processes."""
MAX_PID = 1 << 22
MAX_RESERVED = 1 << 20
"""The most 2 MiB pages a record may say kvmlab added (2 TiB): beyond it, not kvmlab's."""


def _whole(value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{value!r} is not a whole number from {low} to {high}")
    return value


def _checked(data: object) -> SwitchRecord:
    """A :class:`SwitchRecord` from parsed JSON, every field of its type and range
    (ValueError otherwise): a process is (a program of a switch, a pid, a start time)."""
    if not isinstance(data, dict) or data.get("kind") not in ("testpmd", "ovs-dpdk"):
        raise ValueError("not a switch record")
    processes: list[tuple[str, int, int | None]] = []
    for entry in data["processes"]:
        name, pid, started = entry
        if name not in PROGRAMS:
            raise ValueError(f"{name!r} is no switch program")
        processes.append((name, _whole(pid, 1, MAX_PID), _whole(started, 0, 1 << 62)))
    hugepages = data.get("hugepages")
    if hugepages is not None:
        if not processes:  # kvmlab records a switch once a process of it is spawned
            raise ValueError("huge pages reserved for a switch that never ran")
        before, after = hugepages
        _whole(before, 0, 1 << 40)
        _whole(after, before + 1, before + MAX_RESERVED)
        hugepages = (before, after)
    netns = data.get("netns")
    if netns is not None and not (isinstance(netns, str) and namespaces.ours(netns)):
        raise ValueError("netns is not a namespace name kvmlab gives")
    ports = data["ports"]
    if not isinstance(ports, list) or not all(isinstance(p, str) and is_name(p) for p in ports):
        raise ValueError("ports are not names")
    main_core = data.get("main_core")
    if main_core is not None:
        _whole(main_core, 0, 8191)
    cores = data.get("cores", [])
    if not isinstance(cores, list):
        raise ValueError("cores is not a list")
    return SwitchRecord(
        data["kind"],
        ports,
        processes,
        hugepages,
        netns,
        main_core,
        [_whole(c, 0, 8191) for c in cores],
    )


def running(record: SwitchRecord, root: Path) -> list[int]:
    """The recorded processes still alive (pids): the same start time, and a command line
    that names the switch's directory (its sockets, pid files), so a reused pid is never
    taken for the switch's."""
    return [pid for _, pid, started in record.processes if alive(pid, f"{root}/", started)]


def recorded_alive(root: Path) -> int | None:
    """A pid of the recorded switch when it still runs."""
    record = read_record(root)
    live = running(record, root) if record else []
    return live[0] if live else None


def stop_recorded(root: Path) -> bool:
    """Stop a switch another kvmlab started, give back its huge pages, remove its
    directory; True if a process of it ran."""
    record = read_record(root)
    live = running(record, root) if record else []
    if record is not None:
        if record.kind == "ovs-dpdk" and live:
            Ovs(root, record.processes).stop()
        marker = f"{root}/"
        for name, pid, started in record.processes:
            if alive(pid, marker, started) and not terminate(pid, marker, 5.0, started):
                raise RuntimeFailure(
                    f"could not stop the switch's {name} (pid {pid}); {root} is kept"
                )
        if record.kind == "ovs-dpdk":  # by the lab's and switch's names, not the record's
            namespaces.delete(namespaces.ns_name(root.parent.name, SWITCH_NAMES.get(root.name, "")))
        if record.hugepages is not None:
            hugepages.release(hugepages.Reservation(*record.hugepages), guarded=True)
    if root.exists():
        remove_owned(root)
    return bool(live)
