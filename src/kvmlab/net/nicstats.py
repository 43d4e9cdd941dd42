"""Multiqueue of a guest's virtio-net NIC, verified from what the guest prints.

Pure parsers of ``ethtool -l DEV``, ``ethtool -S DEV`` and ``/proc/interrupts`` (the caller
runs them in the guest), a check that the NIC got the queue pairs asked for, and how a
run's traffic and interrupts spread over the queues between two snapshots.

Formats, from the kernel: virtio_net names its virtqueues ``input.N``/``output.N``;
virtio_pci names one MSI-X vector per virtqueue ``virtioK-input.N`` (plus
``virtioK-config``), falls back to a single ``virtioK-virtqueues`` vector when MSI-X has
too few vectors, and to an INTx line named ``virtioK`` without MSI-X (virtio-mmio names
its line the same way). Up to Linux 6.9 ``ethtool -S`` prints ``rx_queue_N_packets``
...; from 6.10 it prints ``rxN_kicks`` ... and totals, and the per-queue packets and
bytes moved to netlink queue stats (``ynl ... qstats-get``): there, only the interrupts
show the spread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from kvmlab.bench.parsers._common import Source

_CHANNELS = re.compile(r"^Channel parameters for (\S+?):?$", re.MULTILINE)
_CHANNEL = re.compile(r"^(RX|TX|Other|Combined):\s+(\d+|n/a)\s*$")
_STAT = re.compile(r"^\s+(\S+): (\d+)$", re.MULTILINE)
# Linux <= 6.9: rx_queue_0_packets, tx_queue_0_tx_timeouts; >= 6.10: rx0_kicks, tx0_hw_packets
_QUEUE_STAT = re.compile(r"(rx|tx)(?:_queue_(\d+)_|(\d+)_)(\w+)")
_VIRTIO = re.compile(r"virtio\d+")
_VQ = re.compile(r"(input|output)\.(\d+)")

Kind = Literal["input", "output"]


@dataclass(frozen=True)
class ChannelCounts:
    """One block of ``ethtool -l``; None where ethtool printed ``n/a``."""

    rx: int | None
    tx: int | None
    other: int | None
    combined: int | None


@dataclass(frozen=True)
class Channels:
    """``ethtool -l DEV``: the most channels the device offers and the ones in use."""

    device: str
    maximum: ChannelCounts
    current: ChannelCounts


def _error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else "no output"


def parse_channels(text: str) -> Channels:
    """``ethtool -l`` (netlink ``n/a`` or ioctl ``0``); ParseError on an error or no output."""
    src = Source("ethtool -l", text)
    head = _CHANNELS.search(text)
    if head is None:
        raise src.error(_error_line(text))
    blocks: list[dict[str, int | None]] = []
    for line in text[head.end() :].splitlines():
        if line.strip() in ("Pre-set maximums:", "Current hardware settings:"):
            blocks.append({})
        elif (m := _CHANNEL.match(line.strip())) and blocks:
            blocks[-1][m.group(1).lower()] = None if m.group(2) == "n/a" else int(m.group(2))
    if len(blocks) != 2 or any("combined" not in b for b in blocks):
        raise src.error("no 'Combined:' in both 'Pre-set maximums' and 'Current hardware settings'")
    maximum, current = (
        ChannelCounts(b.get("rx"), b.get("tx"), b.get("other"), b.get("combined")) for b in blocks
    )
    return Channels(head.group(1), maximum, current)


@dataclass(frozen=True)
class QueueCounters:
    """One queue pair's ``ethtool -S`` counters, by name without prefix (``packets``,
    ``kicks``, ``tx_timeouts``, ``hw_packets``)."""

    rx: Mapping[str, int] = field(default_factory=dict)
    tx: Mapping[str, int] = field(default_factory=dict)

    def packets(self, direction: Literal["rx", "tx"]) -> int | None:
        """Packets the driver counted (Linux <= 6.9), else the device's (``hw_packets``)."""
        stats = self.rx if direction == "rx" else self.tx
        return stats.get("packets", stats.get("hw_packets"))


def parse_queue_counters(text: str) -> dict[int, QueueCounters]:
    """Per-queue counters of ``ethtool -S`` on virtio_net (both naming schemes), by queue."""
    src = Source("ethtool -S", text)
    if "NIC statistics:" not in text:
        raise src.error(_error_line(text))
    rx: dict[int, dict[str, int]] = {}
    tx: dict[int, dict[str, int]] = {}
    for name, value in _STAT.findall(text):
        if m := _QUEUE_STAT.fullmatch(name):
            queue = int(m.group(2) or m.group(3))
            (rx if m.group(1) == "rx" else tx).setdefault(queue, {})[m.group(4)] = int(value)
    if not rx and not tx:
        raise src.error("no per-queue counters (rx_queue_N_* or rxN_*): not virtio_net?")
    return {q: QueueCounters(rx.get(q, {}), tx.get(q, {})) for q in sorted(rx.keys() | tx.keys())}


def virtio_device(link: str) -> str | None:
    """``virtioK`` from the target of ``/sys/class/net/DEV/device`` (``../../../virtio2``);
    None when the NIC is no virtio device (e1000e: a PCI address)."""
    name = PurePosixPath(link.strip()).name
    return name if _VIRTIO.fullmatch(name) else None


@dataclass(frozen=True)
class Vectors:
    """One virtio device's lines of ``/proc/interrupts``: per-CPU counts by name suffix
    (``input.0``, ``output.0``, ``config``, ``virtqueues``; ``""`` for an INTx line)."""

    device: str
    per_cpu: Mapping[str, tuple[int, ...]]

    @property
    def mode(self) -> Literal["per-queue", "shared", "intx"]:
        """One vector per virtqueue, one MSI-X vector for all of them, or one INTx line."""
        if "" in self.per_cpu:
            return "intx"
        return "shared" if "virtqueues" in self.per_cpu else "per-queue"

    def queues(self, kind: Kind) -> dict[int, int]:
        """Interrupts of each ``input.N`` (rx) or ``output.N`` (tx) vector, summed over CPUs."""
        found = [
            (int(m.group(2)), sum(counts))
            for name, counts in self.per_cpu.items()
            if (m := _VQ.fullmatch(name)) and m.group(1) == kind
        ]
        return dict(sorted(found))

    def cpus(self) -> dict[int, int]:
        """Interrupts of the virtqueue vectors (not ``config``) on each CPU."""
        vqs = [counts for name, counts in self.per_cpu.items() if name != "config"]
        return {cpu: sum(column) for cpu, column in enumerate(zip(*vqs, strict=True))}


def parse_interrupts(text: str, device: str) -> Vectors:
    """The vectors of ``device`` (``virtio2``) in ``/proc/interrupts``; ParseError without any."""
    src = Source("/proc/interrupts", text)
    lines = text.splitlines()
    ncpu = len(re.findall(r"\bCPU\d+\b", lines[0])) if lines else 0
    if not ncpu:
        raise src.error("no CPU header: not /proc/interrupts")
    per_cpu: dict[str, tuple[int, ...]] = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        words = rest.split()
        if not label.strip().isdigit() or len(words) <= ncpu:
            continue
        counts = tuple(int(w) for w in words[:ncpu])
        for action in " ".join(words[ncpu:]).replace(",", " ").split():
            if action == device or action.startswith(device + "-"):
                name = action[len(device) + 1 :]
                old = per_cpu.get(name, (0,) * ncpu)
                per_cpu[name] = tuple(a + b for a, b in zip(old, counts, strict=True))
    if not per_cpu:
        raise src.error(f"no interrupt of {device} (is it the NIC's virtio device?)")
    return Vectors(device, per_cpu)


@dataclass(frozen=True)
class MqFinding:
    """Why a NIC has fewer working queues than asked, and what fixes it."""

    what: str
    reason: str
    fix: str


def check_multiqueue(asked: int, channels: Channels, vectors: Vectors | None) -> list[MqFinding]:
    """What keeps ``asked`` queue pairs from working; empty when they all do."""
    if asked <= 1:
        return []
    dev, found, vec = channels.device, [], f"vectors={2 * asked + 2}"
    offered, current = channels.maximum.combined or 0, channels.current.combined or 0
    if offered < asked:
        found.append(
            MqFinding(
                f"{dev}: the device offers {offered} queue pair(s), {asked} asked",
                "the virtio-net device was created with fewer queues: queues= missing or smaller "
                "on the QEMU -netdev (tap, vhost-user), or mq=on missing on the -device",
                f"-netdev ...,queues={asked} -device virtio-net-pci,...,mq=on,{vec}",
            )
        )
    elif current < asked:
        found.append(
            MqFinding(
                f"{dev}: {current} of {asked} queue pairs in use (the device offers {offered})",
                "ethtool -L was not applied or failed (at boot virtio_net uses as many pairs as "
                "the guest has vCPUs, at most the device's)",
                f"ethtool -L {dev} combined {asked}",
            )
        )
    if vectors is None:
        return found
    if vectors.mode == "shared":
        found.append(
            MqFinding(
                f"{dev}: all queues of {vectors.device} share one interrupt "
                f"({vectors.device}-virtqueues)",
                "MSI-X has too few vectors for one per virtqueue (vectors= on the -device below "
                "2 x queues + 2), so the kernel fell back to a shared vector",
                f"-device virtio-net-pci,...,{vec}",
            )
        )
    elif vectors.mode == "intx":
        found.append(
            MqFinding(
                f"{dev}: {vectors.device} has a single interrupt line, no MSI-X",
                "MSI-X is off (vectors=0 on the -device, which kvmlab sets for vhost-user under "
                "TCG) or the NIC is virtio-mmio (microvm): every queue raises the same interrupt",
                f"virtio-net-pci with {vec} (not under TCG with vhost-user)",
            )
        )
    elif offered >= asked:
        pairs = min(len(vectors.queues("input")), len(vectors.queues("output")))
        if pairs < asked:
            found.append(
                MqFinding(
                    f"{dev}: {vectors.device} has vectors for {pairs} queue pair(s), {asked} asked",
                    "fewer per-queue vectors than queue pairs: vectors= on the -device too small",
                    f"-device virtio-net-pci,...,{vec}",
                )
            )
    return found


@dataclass(frozen=True)
class Balance:
    """How one counter's increase spread over queues (or CPUs), in index order."""

    what: str
    deltas: tuple[int, ...]
    over: str = "queues"

    @property
    def total(self) -> int:
        return sum(self.deltas)

    def percents(self) -> list[int]:
        """Whole percents summing to 100 (largest remainder); zeros without traffic."""
        if not self.total:
            return [0] * len(self.deltas)
        raw = [100 * d / self.total for d in self.deltas]
        out = [int(r) for r in raw]
        by_remainder = sorted(range(len(raw)), key=lambda i: out[i] - raw[i])
        for i in by_remainder[: 100 - sum(out)]:
            out[i] += 1
        return out

    @property
    def busiest_share(self) -> float:
        """Percent of the increase on the busiest queue (0 without traffic)."""
        return 100 * max(self.deltas, default=0) / self.total if self.total else 0.0

    def carrying(self, min_percent: float = 5.0) -> int:
        """How many queues carried at least ``min_percent`` of the increase."""
        return sum(1 for d in self.deltas if self.total and 100 * d / self.total >= min_percent)

    def __str__(self) -> str:
        n = len(self.deltas)
        head = f"{self.what} {n} {self.over if n != 1 else self.over[:-1]}"
        if not self.total:
            return f"{head}: no traffic"
        return f"{head}: {'/'.join(str(p) for p in self.percents())} %"


@dataclass(frozen=True)
class NicSnapshot:
    """``ethtool -S`` and the NIC's vectors at one moment."""

    counters: Mapping[int, QueueCounters]
    vectors: Vectors | None = None


@dataclass(frozen=True)
class Spread:
    """How a run's packets and interrupts spread; None where the guest cannot tell."""

    rx: Balance | None
    tx: Balance | None
    rx_irq: Balance | None
    tx_irq: Balance | None
    cpu_irq: Balance | None
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """One line per balance measured, then the notes."""
        found = (self.rx, self.tx, self.rx_irq, self.tx_irq, self.cpu_irq)
        return [str(b) for b in found if b is not None] + list(self.notes)


def _deltas(b: Mapping[int, int], a: Mapping[int, int], keys: list[int]) -> tuple[int, ...]:
    return tuple(max(a.get(k, 0) - b.get(k, 0), 0) for k in keys)


def _packets(snap: NicSnapshot, direction: Literal["rx", "tx"]) -> dict[int, int] | None:
    got = {q: c.packets(direction) for q, c in snap.counters.items()}
    if not got or any(v is None for v in got.values()):
        return None
    return {q: v for q, v in got.items() if v is not None}


def spread(before: NicSnapshot, after: NicSnapshot, queues: int | None = None) -> Spread:
    """Per-queue increases between two snapshots; ``queues`` limits (or pads) every balance
    to queues 0..queues-1 (vectors exist for all the device's queues, not just those in use)."""

    def balance(what: str, b: Mapping[int, int], a: Mapping[int, int]) -> Balance:
        return Balance(what, _deltas(b, a, list(range(queues)) if queues else sorted(a)))

    notes: list[str] = []
    traffic: list[Balance | None] = []
    for direction in ("rx", "tx"):
        b, a = _packets(before, direction), _packets(after, direction)
        traffic.append(balance(direction, b, a) if a is not None and b is not None else None)
    if None in traffic:
        notes.append(
            "ethtool -S shows no per-queue packets (Linux >= 6.10 reports them only "
            "as netlink queue stats): the interrupts show the spread"
        )
    rx_irq = tx_irq = cpu_irq = None
    vb, va = before.vectors, after.vectors
    if vb is not None and va is not None:
        if va.mode == "per-queue":
            rx_irq = balance("rx irq", vb.queues("input"), va.queues("input"))
            tx_irq = balance("tx irq", vb.queues("output"), va.queues("output"))
        else:
            notes.append(
                f"{va.device} has no per-queue vectors ({va.mode}): its interrupts "
                "cannot show the spread"
            )
        c_after = va.cpus()
        cpu_irq = Balance("irq", _deltas(vb.cpus(), c_after, sorted(c_after)), "CPUs")
    return Spread(traffic[0], traffic[1], rx_irq, tx_irq, cpu_irq, tuple(notes))
