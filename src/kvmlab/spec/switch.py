"""``[switch]`` of a lab, the userspace vswitch kvmlab runs for the guests' vhost-user NICs,
and ``[bench.pvp]``, the packet-rate benchmark through it (as in the vhost-user PVP
write-up and the networking course lab)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator

from kvmlab.spec.base import SpecModel
from kvmlab.spec.units import MAX_CPU, NAME_PATTERN, CpuSet, MemorySize, number_text

SwitchKind = Literal["testpmd", "ovs-dpdk"]


class SwitchSpec(SpecModel):
    """A DPDK vswitch on the host: `testpmd` with `net_vhost` ports in io forwarding, port
    pairs in order (as in the vhost-user PVP write-up), or `ovs-dpdk`, a private OVS with a
    `netdev` bridge and `dpdkvhostuserclient` ports, flows pairing them (as in the networking
    course lab). Guests' vhost-user NICs name its ports (`port = "..."`); kvmlab makes the
    sockets and picks each side's role."""

    # Strict field by field, not as a model: kvmlab builds one from a running switch's
    # record (its kind as text), which a model-wide strict mode would type as an error.
    model_config = ConfigDict(strict=False)

    kind: SwitchKind
    """`testpmd` (QEMU is the socket client) or `ovs-dpdk` (QEMU is the socket server)."""

    cores: CpuSet = (1,)
    """Host CPUs that forward: testpmd's forwarding lcores, OVS's `pmd-cpu-mask`."""

    main_core: StrictInt = Field(default=0, ge=0, le=MAX_CPU)
    """Host CPU of testpmd's main lcore / OVS's `dpdk-lcore-mask` (control, not forwarding)."""

    memory: MemorySize = 512 * 1024 * 1024
    """DPDK memory of the switch process (`-m` / `dpdk-socket-mem`)."""

    hugepages: StrictBool = False
    """Back DPDK's memory with huge pages (reserved for the run when none are free, released
    after); false runs with `--no-huge`, which works anywhere and is slower."""

    queues: StrictInt = Field(default=1, ge=1, le=16)
    """Queue pairs per port (guests' NICs get as many)."""

    descriptors: StrictInt = Field(default=1024, ge=64, le=4096)
    """RX and TX ring sizes of each port (a power of two)."""

    idle_sleep_max_us: StrictInt = Field(default=0, ge=0, le=10000)
    """`ovs-dpdk`: the longest a poll-mode thread sleeps per iteration while its queues
    bring (almost) nothing (OVS's load-based sleeping, `pmd-maxsleep`; OVS 3.1 or newer).
    0 polls without pause, as packet-rate measurements (`pvp`) need; on a host with fewer
    cores than the switch and its guests want, a few hundred microseconds give the
    guests back the core the poller would spin on. testpmd has no such setting."""

    @field_validator("descriptors")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError(f"must be a power of two, got {v}")
        return v

    @model_validator(mode="after")
    def _sleep_is_ovs_only(self) -> SwitchSpec:
        if self.idle_sleep_max_us and self.kind != "ovs-dpdk":
            raise ValueError(
                f"idle_sleep_max_us is OVS-DPDK's load-based sleeping; {self.kind} polls "
                'without pause (use kind = "ovs-dpdk", or remove it)'
            )
        return self


class PvpSpec(SpecModel):
    """Physical-virtual-physical without a NIC: a testpmd generator on `virtio-user` ports of
    the switch sends through a guest, which returns the packets with testpmd in `macswap`, to
    a testpmd sink; beside it the loopback ceiling without the guest."""

    guest: str | None = Field(default=None, pattern=NAME_PATTERN)
    """The top-level guest that forwards (it needs two vhost-user NICs on switch ports);
    unset: the first guest with two."""

    frame_sizes: list[int] = Field(default=[64, 1518], min_length=1, max_length=8)
    """Ethernet frame sizes in bytes (64 to 9000), each measured separately."""

    multi_flow: bool = False
    """Send many flows (testpmd varies the source IP per packet: `--txonly-multi-flow`),
    which spreads them over the queues of multiqueue ports; false: one flow."""

    seconds: float = Field(default=5.0, gt=0, le=3600)
    """Length of each measured window."""

    warmup: float = Field(default=2.0, ge=0, le=600)
    """Traffic before the counters are cleared."""

    repetitions: int | None = Field(default=None, ge=1, le=100)
    """Measured windows per frame size (default: the suite's repetitions)."""

    loopback: bool = True
    """Also measure generator -> switch -> sink without the guest (the ceiling)."""

    compare_tuning: bool = False
    """Alternate windows without and with the lab's `[tuning]` applied (rolled back after),
    filed as variants `untuned` and `tuned`: the tuning's gain measured in one run."""

    @field_validator("frame_sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if not 64 <= s <= 9000]
        if bad:
            raise ValueError(f"frame sizes are 64..9000 bytes, got {number_text(bad[0])}")
        return list(dict.fromkeys(v))


class TuningSpec(SpecModel):
    """Host tuning for the packet path (the vhost-user PVP write-up's cpu-partitioning):
    `kvmlab tune apply LAB`, or, with `[bench.pvp] compare_tuning = true`, PVP
    windows alternating untuned and tuned."""

    profile: Literal["cpu-partitioning"] = "cpu-partitioning"
    """The run-time half of tuned's cpu-partitioning: IRQs and unbound work off the
    isolated CPUs, NMI watchdog, THP, KSM and NUMA balancing off, vmstat every 10 s."""

    isolated: CpuSet | None = None
    """CPUs to keep the host's own work off (default: the switch's forwarding cores)."""

    unmovable_irqs: Literal["refuse", "accept"] = "refuse"
    """An IRQ the kernel manages (a device queue's) cannot be moved at run time. Whose
    interrupts land on a host CPU is fine either way; one landing on an isolated CPU makes
    tuning fail (``refuse``, naming it and the boot-time fix ``isolcpus=managed_irq``), or
    is accepted and named in every tuned result (``accept``)."""
