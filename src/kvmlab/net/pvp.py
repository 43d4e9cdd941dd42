"""The PVP benchmark: packets from a NIC-less generator through the switch, the guest and
back through the switch to a sink, counted at every hop; and its loopback ceiling,
generator -> switch -> sink without the guest.

A window is a trial, as RFC 2544 counts them: every process's counters (generator,
switch, guest, sink) read while nothing is in flight, the generator sending for the
window's seconds, the path drained, the counters read again. Every hop's rate is its count
over the same sending time, so packets are conserved from hop to hop (no hop's window is
shifted by how long another process takes to answer: the guest's agent takes seconds under
TCG) and a hop that loses packets shows as the drop between it and the next.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from kvmlab.errors import KvmlabError, RuntimeFailure
from kvmlab.fabric.switch import GEN_PORT, SINK_PORT, SWITCH_DIRS, Switch
from kvmlab.net.testpmd_stats import PortRates, rates
from kvmlab.net.traffic import (
    Cores,
    Counted,
    HostTestPmd,
    SwitchCounted,
    frame_size,
    pause,
    resume,
    traffic,
)
from kvmlab.proc.confined import create_owned, remove_owned
from kvmlab.progress import Progress
from kvmlab.results.model import Sample
from kvmlab.spec.switch import PvpSpec, SwitchSpec

WORKLOAD = "pvp"
LOOPBACK_DIR = SWITCH_DIRS[1]
TRAFFIC_DIR = ".traffic"


@dataclass(frozen=True)
class Hop:
    """Where packets are counted: a process, its port, a direction."""

    name: str
    process: str
    port: int
    direction: str
    """``rx`` or ``tx``."""

    def read(self, window: dict[str, dict[int, PortRates]]) -> tuple[float, float]:
        """(packets/s, lost packets/s) at this hop in a window."""
        got = window[self.process][self.port]
        if self.direction == "rx":
            return got.rx_pps, got.rx_lost_pps
        return got.tx_pps, got.tx_lost_pps


def loopback_hops(ports: Sequence[str]) -> list[Hop]:
    """generator -> switch -> sink."""
    return [
        Hop("sent", "generator", 0, "tx"),
        Hop("switch in", "switch", ports.index(GEN_PORT), "rx"),
        Hop("switch out", "switch", ports.index(SINK_PORT), "tx"),
        Hop("received", "sink", 0, "rx"),
    ]


def pvp_hops(
    ports: Sequence[str], guest_ports: tuple[str, str], guest_ids: tuple[int, int] = (0, 1)
) -> list[Hop]:
    """generator -> switch -> guest NIC 0 -> guest macswap -> guest NIC 1 -> switch -> sink;
    ``guest_ids``: the DPDK port numbers of those two NICs in the guest."""
    first, second = guest_ports
    return [
        Hop("sent", "generator", 0, "tx"),
        Hop("switch in", "switch", ports.index(GEN_PORT), "rx"),
        Hop("switch to guest", "switch", ports.index(first), "tx"),
        Hop("guest in", "guest", guest_ids[0], "rx"),
        Hop("guest out", "guest", guest_ids[1], "tx"),
        Hop("switch from guest", "switch", ports.index(second), "rx"),
        Hop("switch out", "switch", ports.index(SINK_PORT), "tx"),
        Hop("received", "sink", 0, "rx"),
    ]


def window(
    gen: HostTestPmd, counted: Sequence[Counted], seconds: float
) -> dict[str, dict[int, PortRates]]:
    """One trial of ``seconds`` (the generator stopped before and after): every process's
    port rates, each hop's count over the generator's sending time."""
    if not drain(counted):  # what an earlier step left in a ring is not this trial's
        raise RuntimeFailure(
            f"pvp: packets still moved {DRAIN_LIMIT:g} s after the generator paused: "
            "the trial's counts would not add up"
        )
    before = {c.name: c.snapshot() for c in counted}
    for port in before[gen.name].ports.values():
        port.tx_dropped = 0  # testpmd's "start" zeroes its forwarding stats (TX-dropped)
    resume(gen)  # testpmd flushes its RX queues, then sends: sending starts as it answers
    started = time.monotonic()
    time.sleep(seconds)
    stopped = time.monotonic()  # "stop" takes effect first, then prints its statistics
    pause(gen)
    if not drain(counted):
        raise RuntimeFailure(
            f"pvp: packets still moved {DRAIN_LIMIT:g} s after the generator stopped: "
            "the trial's counts would not add up"
        )
    after = {c.name: c.snapshot() for c in counted}
    return {name: rates(before[name], after[name], stopped - started) for name in before}


DRAIN_QUIET = 0.3
"""Every hop's counters unchanged this long (seconds): nothing is left in flight."""
DRAIN_LIMIT = 10.0


def drain(counted: Sequence[Counted]) -> bool:
    """Wait until no hop's counters move any more (packets still in the switch's and the
    guest's rings after the generator stopped, or left there before a trial: a guest's
    ring holds 256, which its testpmd may take in only once it polls); False if they
    still do after :data:`DRAIN_LIMIT` seconds."""
    deadline = time.monotonic() + DRAIN_LIMIT
    last: tuple[int, ...] | None = None
    while time.monotonic() < deadline:
        now = tuple(
            sum(p.rx_packets + p.tx_packets for p in c.snapshot().ports.values()) for c in counted
        )
        if now == last:
            return True
        last = now
        time.sleep(DRAIN_QUIET)
    return False


@dataclass(frozen=True)
class Where:
    """What the samples are filed under (the level table's column) and how they came."""

    variant: str
    guest: str
    level: str
    accel: str
    command: str
    cores: int
    """Forwarding cores of the switch (for the per-core rate)."""


def samples_of(
    hops: Sequence[Hop], got: dict[str, dict[int, PortRates]], frame: int, rep: int, at: Where
) -> list[Sample]:
    """A window as samples: Mpps at every hop, lost Mpps where counted, the loss between
    sent and received, and the received rate per forwarding core of the switch."""
    out = []

    def add(metric: str, value: float, unit: str, higher: bool) -> None:
        out.append(
            Sample(
                at.variant,
                at.guest,
                at.level,
                at.accel,
                WORKLOAD,
                f"{frame}B {metric}",
                value,
                unit,
                higher,
                rep,
                at.command,
            )
        )

    rate = {}
    for hop in hops:
        pps, lost = hop.read(got)
        rate[hop.name] = pps
        add(hop.name, pps / 1e6, "Mpps", True)
        if lost:
            add(f"{hop.name} lost", lost / 1e6, "Mpps", False)
    sent, received = rate["sent"], rate["received"]
    add("loss", 100.0 * (sent - received) / sent if sent else 0.0, "%", False)
    add("received per switch core", received / 1e6 / max(at.cores, 1), "Mpps", True)
    return out


class Toggle(Protocol):
    """Host tuning switched on and off between windows (:class:`kvmlab.net.tune.Toggle`)."""

    def set(self, on: bool) -> None:
        """Apply (True) or roll back (False)."""


def measure(
    gen: HostTestPmd,
    counted: Sequence[Counted],
    hops: Sequence[Hop],
    frames: Sequence[int],
    warmup: float,
    seconds: float,
    reps: int,
    at: Where,
    progress: Progress,
    tuning: Toggle | None = None,
) -> list[Sample]:
    """For each frame size: a warm-up trial, then ``reps`` trials; every trial's samples.

    With ``tuning``, each repetition is a pair of windows, untuned and tuned in alternating
    order (so a drift in time favours neither), filed as variants ``untuned`` and
    ``tuned``; tuning is rolled back when this returns, however it returns.
    """
    out: list[Sample] = []
    modes = [False] if tuning is None else [False, True]
    try:
        for frame in frames:
            frame_size(gen, frame)
            if warmup > 0:  # a trial whose counts are not kept (caches, rings, the guest)
                window(gen, counted, warmup)
            received: dict[bool, list[float]] = {m: [] for m in modes}
            for rep in range(reps):
                for on in modes if rep % 2 == 0 else modes[::-1]:
                    here = at
                    if tuning is not None:
                        tuning.set(on)
                        time.sleep(SETTLE_SECONDS)
                        here = replace(at, variant=_tuned_variant(at.variant, on))
                    done = samples_of(hops, window(gen, counted, seconds), frame, rep, here)
                    out.extend(done)
                    received[on].append(
                        next(s.value for s in done if s.metric == f"{frame}B received")
                    )
            where = f"{at.level} {at.guest}"
            for on, values in received.items():
                label = "" if tuning is None else (" tuned" if on else " untuned")
                progress.step(
                    f"{where} pvp {frame}B{label}: {statistics.median(values):.3f} Mpps "
                    f"received (median of {reps} trials of {seconds:g} s)"
                )
    finally:
        if tuning is not None:
            try:
                tuning.set(False)
            except KvmlabError as exc:  # what was measured is kept; the host says how to undo
                progress.step(f"WARNING: {exc}; 'kvmlab tune rollback' retries")
    return out


SETTLE_SECONDS = 0.5
"""After tuning changes: IRQs and timers move at their next event."""


def _tuned_variant(variant: str, on: bool) -> str:
    label = "tuned" if on else "untuned"
    return label if variant == "default" else f"{variant}-{label}"


def traffic_cores(spec: SwitchSpec) -> Cores:
    """Generator and sink poll on the switch's main core (its control lcore, idle while it
    forwards); their own main lcore is the switch's first forwarding core (also idle)."""
    return Cores(
        generator=spec.main_core,
        sink=spec.main_core,
        generator_main=spec.cores[0],
        sink_main=spec.cores[0],
    )


def loopback(
    lab: str,
    spec: SwitchSpec,
    pvp: PvpSpec,
    root: Path,
    variant: str,
    reps: int,
    progress: Progress,
    tuning: Toggle | None = None,
) -> list[Sample]:
    """The ceiling: generator -> a switch of the lab's kind with only kvmlab's two ports ->
    sink, in ``root`` (the lab's run directory, locked by the caller)."""
    ports = [GEN_PORT, SINK_PORT]
    progress.step(f"pvp loopback: starting a {spec.kind} switch with ports {', '.join(ports)}")
    with Switch(lab, spec, root / LOOPBACK_DIR, ports, name="loopback") as sw:
        sw.start()
        work = create_owned(root / TRAFFIC_DIR, f"pvp traffic of lab {lab}")
        try:
            with traffic(
                f"kvmlab-{lab}",
                sw.socket(GEN_PORT),
                sw.socket(SINK_PORT),
                traffic_cores(spec),
                work,
                pvp.multi_flow,
                server=not sw.serves_sockets,
            ) as (gen, sink):
                counted = [gen, SwitchCounted(sw), sink]
                at = Where(
                    variant, "host", "L0", "native", describe(spec, pvp, None), len(spec.cores)
                )
                return measure(
                    gen,
                    counted,
                    loopback_hops(ports),
                    pvp.frame_sizes,
                    pvp.warmup,
                    pvp.seconds,
                    reps,
                    at,
                    progress,
                    tuning,
                )
        finally:
            remove_owned(work)


def describe(spec: SwitchSpec, pvp: PvpSpec, guest: str | None) -> str:
    """How the figures came: the whole path in one line."""
    flows = "many flows" if pvp.multi_flow else "one flow"
    mode = "io" if spec.kind == "testpmd" else "port-pair flows"
    switch = (
        f"{spec.kind} switch ({mode}, {len(spec.cores)} core(s), "
        f"{'huge pages' if spec.hugepages else 'no huge pages'})"
    )
    middle = f" -> guest {guest} testpmd macswap -> {switch}" if guest else ""
    return (
        f"testpmd txonly generator ({flows}) -> {switch}{middle} -> testpmd rxonly sink; "
        f"trials of {pvp.seconds:g} s (counted with nothing in flight) after a "
        f"{pvp.warmup:g} s warm-up trial"
    )
