"""The lab's vswitch: started before the guests, stopped after them, on record in between.

It lives in ``LAB/.switch`` (private, kvmlab's marker): the ports' sockets, its log and
``switch.json`` (kind, ports, the pid with its start time). ``kvmlab down`` stops a
switch left running by ``kvmlab up``; one whose process died is cleaned up with the
lab's other stale state. Every switch also has kvmlab's own two ports, ``kvmlab-gen``
and ``kvmlab-sink``, where the PVP benchmark's generator and sink connect.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kvmlab.render.dpdk import TESTPMD, Port, switch_argv
from kvmlab.runtime.errors import RuntimeFailure, StateError
from kvmlab.runtime.owned import create_owned, remove_owned, write_private
from kvmlab.runtime.procs import alive, terminate
from kvmlab.runtime.testpmd import TestPmd
from kvmlab.spec.lab import Lab
from kvmlab.spec.rules import switch_ports
from kvmlab.spec.switch import SwitchSpec

SWITCH_DIR = ".switch"
RECORD = "switch.json"
GEN_PORT, SINK_PORT = "kvmlab-gen", "kvmlab-sink"
READY_SECONDS = 60.0
"""How long a switch may take to set up its ports (DPDK's memory init under load)."""


@dataclass
class SwitchRecord:
    """What ``kvmlab down`` needs to stop a switch it did not start."""

    kind: str
    pid: int
    started: int | None
    ports: list[str]


def lab_ports(lab: Lab) -> list[str]:
    """The switch's ports in order: the generator, the PVP guest's two, the sink, then every
    other guest port. testpmd forwards between neighbours (0-1, 2-3, ...), so packets go
    generator -> guest NIC 0 and guest NIC 1 -> sink."""
    guest_ports = [(name, [n.port for _, n in switch_ports(g)]) for name, g in lab.guests.items()]
    chosen = lab.bench.pvp.guest or next((n for n, p in guest_ports if len(p) >= 2), None)
    pvp = next((p[:2] for n, p in guest_ports if n == chosen and len(p) >= 2), [])
    rest = [p for _, ports in guest_ports for p in ports if p not in pvp]
    order = [GEN_PORT, *pvp, SINK_PORT, *rest] if pvp else [*rest, GEN_PORT, SINK_PORT]
    return [p for p in order if p is not None]


class Switch:
    """A switch process of one lab (``testpmd`` kind), a context manager that stops it."""

    def __init__(self, lab: str, spec: SwitchSpec, root: Path, ports: Sequence[str],
                 name: str = "switch") -> None:  # fmt: skip
        self.lab = lab
        self.spec = spec
        self.dir = root
        self.ports = list(ports)
        self.name = name
        self.process: TestPmd | None = None

    def socket(self, port: str) -> Path:
        """A port's vhost-user socket."""
        return self.dir / f"{port}.sock"

    def start(self, outlive: bool = False) -> None:
        """Create the directory, start the switch, wait until every port's socket exists."""
        if self.spec.kind != "testpmd":
            raise RuntimeFailure(f"switch kind {self.spec.kind!r} is not available yet")
        if shutil.which(TESTPMD) is None:
            raise RuntimeFailure(f"{TESTPMD} not found: install Debian's dpdk package "
                                 "(make deps does)")  # fmt: skip
        create_owned(self.dir, f"switch of lab {self.lab}")
        for port in self.ports:
            if self.socket(port).exists():
                raise StateError(f"{self.socket(port)} is in use by another switch")
        ports = [Port(p, self.socket(p)) for p in self.ports]
        prefix = f"kvmlab-{self.lab}-{self.name}"
        self.process = TestPmd(self.name, switch_argv(self.spec, prefix, ports), self.dir)
        try:
            self.process.start(READY_SECONDS, outlive=outlive)
        finally:
            if self.process.pid:
                self._record()
        deadline = time.monotonic() + 10
        missing = [p for p in self.ports if not self.socket(p).exists()]
        while missing and time.monotonic() < deadline:
            time.sleep(0.05)
            missing = [p for p in self.ports if not self.socket(p).exists()]
        if missing:
            raise RuntimeFailure(f"{self.name}: no socket for port(s) {', '.join(missing)}")
        self.process.command("start")

    def _record(self) -> None:
        assert self.process is not None
        record = SwitchRecord(self.spec.kind, self.process.pid, self.process.started, self.ports)
        write_private(self.dir / RECORD, json.dumps(asdict(record), indent=2))

    @classmethod
    def attached(cls, lab: str, spec: SwitchSpec, root: Path) -> Switch:
        """The running switch of a lab that is up (:class:`StateError` when there is none)."""
        record = read_record(root)
        if record is None or recorded_alive(root) is None:
            raise StateError(f"lab {lab} has no running switch")
        sw = cls(lab, spec, root, record.ports)
        sw.process = TestPmd.attach(sw.name, root, record.pid, record.started)
        return sw

    def command(self, line: str, timeout: float = 30.0) -> str:
        """Type at the switch's prompt."""
        if self.process is None or not self.process.running():
            raise RuntimeFailure(f"the {self.name} of lab {self.lab} is not running")
        return self.process.command(line, timeout)

    def stop(self) -> None:
        """Stop the process and remove the directory (sockets, log, record)."""
        if self.process is not None:
            self.process.stop()
        remove_owned(self.dir)

    def __enter__(self) -> Switch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_record(root: Path) -> SwitchRecord | None:
    """The record of the switch in ``root`` (None when there is none or it is unreadable)."""
    try:
        return SwitchRecord(**json.loads((root / RECORD).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def recorded_alive(root: Path) -> int | None:
    """The pid of the recorded switch when it still runs."""
    record = read_record(root)
    if record is None or not alive(record.pid, started=record.started):
        return None
    return record.pid


def stop_recorded(root: Path) -> bool:
    """Stop a switch another kvmlab started and remove its directory; True if one ran."""
    pid = recorded_alive(root)
    if pid is not None:
        record = read_record(root)
        assert record is not None
        if not terminate(pid, started=record.started, grace=5.0):
            raise RuntimeFailure(f"could not stop the switch (pid {pid}); {root} is kept")
    if root.exists():
        remove_owned(root)
    return pid is not None
