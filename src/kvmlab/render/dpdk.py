"""Command lines of the DPDK programs kvmlab runs: the testpmd switch with ``net_vhost``
ports (as in the vhost-user PVP write-up), and testpmd as a traffic generator or sink on
``net_virtio_user`` ports.

Every process keeps nothing on disk (``--in-memory`` with huge pages, unlinked at once;
``--no-shconf`` without: no files under /var/run/dpdk, nothing to clean after a crash), has
its own ``--file-prefix`` naming it in ``ps``, and ``--no-pci``: kvmlab's packets never
touch a physical NIC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvmlab.spec.switch import SwitchSpec
from kvmlab.spec.units import MIB, format_cpuset

TESTPMD = "dpdk-testpmd"
MBUF_BYTES = 2176
"""An mbuf with its default 2 KiB data room, as testpmd sizes its pool."""
RING = 8192
"""Descriptors per ring of the generator's and sink's ports."""
CRC_BYTES = 4
"""testpmd's ``--txpkts`` is the frame without its CRC: 60 for a 64-byte frame."""


@dataclass(frozen=True)
class Port:
    """A switch port: its name and its vhost-user socket."""

    name: str
    socket: Path


def eal(prefix: str, cores: Sequence[int], main: int, memory: int, hugepages: bool) -> list[str]:
    """DPDK's EAL options: lcores (main first), memory, no PCI, nothing on disk."""
    lcores = format_cpuset(tuple(sorted({main, *cores})))
    # --no-huge implies legacy memory, which --in-memory refuses: --no-shconf is the part of
    # it that matters there (no shared config under /var/run/dpdk)
    mem = ["--in-memory", "--single-file-segments"] if hugepages else ["--no-huge", "--no-shconf"]
    return [
        "-l",
        lcores,
        "--main-lcore",
        str(main),
        *mem,
        f"--file-prefix={prefix}",
        "--no-pci",
        "-m",
        str(max(memory // MIB, 64)),
    ]


def mbufs(memory: int) -> str:
    """testpmd's mbuf pool sized to half the process's memory (its default asks for more
    than a small ``-m`` holds)."""
    return f"--total-num-mbufs={max(memory // 2 // MBUF_BYTES, 2048)}"


def switch_argv(spec: SwitchSpec, prefix: str, ports: Sequence[Port]) -> list[str]:
    """testpmd as the vswitch: a ``net_vhost`` server port per switch port, io forwarding
    between neighbours (port 0 <-> 1, 2 <-> 3, ...)."""
    vdevs = []
    for i, port in enumerate(ports):
        vdevs += ["--vdev", f"net_vhost{i},iface={port.socket},queues={spec.queues}"]
    return [
        TESTPMD,
        *eal(prefix, spec.cores, spec.main_core, spec.memory, spec.hugepages),
        *vdevs,
        "--",
        "-i",
        "--forward-mode=io",
        "--port-topology=paired",
        f"--nb-cores={len(spec.cores)}",
        f"--rxq={spec.queues}",
        f"--txq={spec.queues}",
        f"--rxd={spec.descriptors}",
        f"--txd={spec.descriptors}",
        mbufs(spec.memory),
    ]


def bridge_argv(
    prefix: str, socket: Path, tap: str, core: int, main: int, server: bool = False
) -> list[str]:
    """testpmd joining a switch port (``net_virtio_user`` on ``socket``; ``server``: it
    listens there) to a kernel tap ``tap`` (``net_tap``, made in testpmd's own network
    namespace), io forwarding both ways: the kernel's sockets reach the switch."""
    memory = 256 * MIB
    vdev = f"net_virtio_user0,path={socket},queues=1,queue_size=1024" + (
        ",server=1" if server else ""
    )
    return [
        TESTPMD,
        *eal(prefix, [core], main, memory, False),
        "--vdev",
        vdev,
        "--vdev",
        f"net_tap0,iface={tap}",
        "--",
        "-i",
        "--forward-mode=io",
        "--nb-cores=1",
        "--rxq=1",
        "--txq=1",
        # few mbufs: the tap's GSO pool comes out of the same memory (with half of it in
        # mbufs, as the generator takes, net_tap fails to set up its queues)
        f"--total-num-mbufs={BRIDGE_MBUFS}",
    ]


BRIDGE_MBUFS = 8192
"""Ample for probes at 1 kHz (the rings hold 1024 each way)."""


def traffic_argv(
    role: str,
    prefix: str,
    socket: Path,
    core: int,
    main: int,
    frame: int,
    multi_flow: bool,
    server: bool = False,
    memory: int = 256 * MIB,
) -> list[str]:
    """testpmd as the generator (``role`` ``txonly``: frames of ``frame`` bytes on the wire)
    or the sink (``rxonly``) on one ``net_virtio_user`` port; ``server``: it listens on the
    socket (an OVS ``dpdkvhostuserclient`` port connects to it)."""
    vdev = f"net_virtio_user0,path={socket},queues=1,queue_size={RING}" + (
        ",server=1" if server else ""
    )
    txonly = [f"--txpkts={frame - CRC_BYTES}"] + (["--txonly-multi-flow"] if multi_flow else [])
    # Big rings: where the generator or sink shares a CPU with another poller, the ring is
    # all that holds packets while it is scheduled out (a 256-entry ring capped the sink at
    # ~32 kpps, one ring per scheduler slice).
    rings = [f"--rxd={RING}", f"--txd={RING}"]
    return [
        TESTPMD,
        *eal(prefix, [core], main, memory, False),
        "--vdev",
        vdev,
        "--",
        "-i",
        f"--forward-mode={role}",
        "--nb-cores=1",
        "--rxq=1",
        "--txq=1",
        mbufs(memory),
        *rings,
        *(txonly if role == "txonly" else []),
    ]
