"""The NIC-less traffic generator and sink: testpmd on ``net_virtio_user`` switch ports.

The generator sends in ``txonly`` (frames of the asked size, optionally many flows), the
sink counts in ``rxonly``. Both run for one benchmark and die with kvmlab if it is killed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from kvmlab.fabric.switch import Switch
from kvmlab.fabric.testpmd import TestPmd
from kvmlab.net.ovs_stats import parse_dump_ports
from kvmlab.net.testpmd_stats import Snapshot, add_fwd_stats, parse_port_stats
from kvmlab.render.dpdk import CRC_BYTES, traffic_argv

READY_SECONDS = 60.0


class Counted:
    """Something kvmlab reads testpmd counters from (a host process or the guest's)."""

    name: str

    def snapshot(self) -> Snapshot:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass
class HostTestPmd(Counted):
    """A testpmd on the host whose counters kvmlab reads at its prompt."""

    name: str
    process: TestPmd

    def snapshot(self) -> Snapshot:
        """Port counters plus the forwarding engine's drops, stamped with the host clock
        halfway through reading them."""
        start = time.monotonic()
        ports = self.process.command("show port stats all")
        at = (start + time.monotonic()) / 2
        fwd = self.process.command("show fwd stats all")
        return add_fwd_stats(parse_port_stats(ports, at), fwd)


@dataclass
class SwitchCounted(Counted):
    """The lab's switch as a counted hop (testpmd's statistics or OVS's port counters,
    OpenFlow port N as port N-1, so both number ports in the switch's port order)."""

    switch: Switch
    name: str = "switch"

    def snapshot(self) -> Snapshot:
        """Every port's counters, stamped halfway through reading them."""
        if self.switch.process is not None:  # testpmd: read like any host testpmd
            if not self.switch.process.running():
                self.switch.counters()  # raises, naming the switch and its log
            return HostTestPmd(self.name, self.switch.process).snapshot()
        start = time.monotonic()
        text = self.switch.counters()
        return parse_dump_ports(text, (start + time.monotonic()) / 2)


@dataclass(frozen=True)
class Cores:
    """Where the generator and the sink poll, and each one's main lcore (idle: it only
    answers kvmlab's commands; it must differ from the polling one)."""

    generator: int
    sink: int
    generator_main: int
    sink_main: int


@contextmanager
def traffic(
    prefix: str,
    gen_socket: Path,
    sink_socket: Path,
    cores: Cores,
    directory: Path,
    multi_flow: bool,
    server: bool = False,
) -> Iterator[tuple[HostTestPmd, HostTestPmd]]:
    """The sink and the generator started on their sockets (sink first), stopped after;
    their FIFOs and logs in ``directory`` (the caller's, removed by the caller)."""
    with ExitStack() as stack:
        sink = TestPmd(
            "sink",
            traffic_argv(
                "rxonly",
                f"{prefix}-sink",
                sink_socket,
                cores.sink,
                cores.sink_main,
                64,
                False,
                server,
            ),
            directory,
        )
        stack.callback(sink.stop)
        sink.start(READY_SECONDS)
        gen_argv = traffic_argv(
            "txonly",
            f"{prefix}-gen",
            gen_socket,
            cores.generator,
            cores.generator_main,
            64,
            multi_flow,
            server,
        )
        gen = TestPmd("generator", gen_argv, directory)
        stack.callback(gen.stop)
        gen.start(READY_SECONDS)
        sink.command("start")
        yield HostTestPmd("generator", gen), HostTestPmd("sink", sink)


def frame_size(gen: HostTestPmd, frame: int) -> None:
    """The generator stopped, its next frames ``frame`` bytes on the wire."""
    gen.process.command("stop")
    gen.process.command(f"set txpkts {frame - CRC_BYTES}")


def resume(gen: HostTestPmd) -> None:
    """Start sending."""
    gen.process.command("start")


def pause(gen: HostTestPmd) -> None:
    """Stop sending."""
    gen.process.command("stop")
