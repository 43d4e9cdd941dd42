"""The migrated guest's workload, whatever the transport: the guest looked up (running,
migratable), the dirtying workload started in it with what the checks compare against,
and the verdict's checks afterwards, on whichever side it runs. The commands these run
inside the guest are :mod:`.guestside`'s."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import KvmlabError, RuntimeFailure, StateError, UsageError
from kvmlab.migrate import guestside
from kvmlab.migrate.result import Outcome
from kvmlab.proc.signals import deferred_signals
from kvmlab.progress import Progress
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord, LabDir


@dataclass(frozen=True)
class Workload:
    """The dirtying workload in the guest during the migration."""

    mem_mib: int = 128
    rate_mibs: float = 0.0
    """MiB/s; 0: as fast as the guest can."""
    warmup_s: float = 3.0


DEFAULT_WORKLOAD = Workload()
"""128 MiB dirtied as fast as the guest can, after 3 s of warm-up."""


def running_source(address: str) -> tuple[LabDir, Path, GuestRecord]:
    parts = address.split("/")
    if len(parts) < 2:
        raise UsageError(f"{address!r} is not a guest address; write LAB/GUEST")
    lab_dir = LabDir.of(parts[0])
    guest_dir = lab_dir.guest_dir(parts[1:])
    if len(parts) > 2:
        raise UsageError(
            f"{address}: kvmlab migrates top-level guests only (not a guest "
            "inside a guest hypervisor)"
        )
    if not lab_dir.exists() or not guest_dir.is_dir():
        raise StateError(f"{address} is not up (kvmlab ps lists what runs)")
    record = GuestRecord.read(guest_dir)
    if record.state != "running":
        raise StateError(f"{address} is not running (its state: {record.state})")
    if not backends.running(record, guest_dir):
        raise StateError(
            f"{address}: its QEMU has exited (see {guest_dir}/serial.log; "
            f"'kvmlab down {parts[0]}' cleans up)"
        )
    if not record.migratable:
        raise UsageError(
            f"{address} cannot be migrated: it mounts the host's root over 9p, "
            "which blocks migration; set migratable = true for it in the lab "
            "file and bring the lab up again"
        )
    return lab_dir, guest_dir, record


@dataclass(frozen=True)
class Baseline:
    """What the checks after the migration compare against."""

    dirtier: guestside.Dirtier
    digest: str
    klines: int
    disks: tuple[guestside.DiskDigest, ...] = ()
    """The disks the migration copies, as the guest read them before it."""


def check_fits(workload: Workload, record: GuestRecord, address: str) -> None:
    """Refuse a dirtied working set the guest has no room for (3/4 of its RAM at most)."""
    if workload.mem_mib * 1048576 > record.memory * 3 // 4:
        raise UsageError(
            f"--dirty-mem {workload.mem_mib} MiB does not fit {address}: at most "
            f"{record.memory * 3 // 4 // 1048576} MiB (3/4 of its RAM)"
        )


def start_workload(
    source: Machine,
    address: str,
    workload: Workload,
    outcome: Outcome,
    progress: Progress,
    disks: tuple[tuple[str, int], ...] = (),
) -> Baseline:
    """kvmlab-dirty started in the guest, a file written, the copied disks (``disks``: their
    targets and sizes in bytes, in the domain's order) read, the memory verified once and the
    warm-up waited out (the rate reached noted in ``outcome``): what the checks after the
    migration compare against. On any failure the dirtier is stopped again."""
    progress.step(
        f"starting kvmlab-dirty in {address}: {workload.mem_mib} MiB at "
        f"{workload.rate_mibs:g} MiB/s"
    )
    t_verify = time.monotonic()
    dirtier = guestside.start_dirtier(source, workload.mem_mib, workload.rate_mibs)
    try:
        digest = guestside.write_check_file(source)
        klines = guestside.kernel_lines(source)
        read: tuple[guestside.DiskDigest, ...] = ()
        if disks:
            progress.step(f"reading the {len(disks)} disk(s) to copy in {address}")
            devices = guestside.guest_disks(source, list(disks))
            read = tuple(guestside.read_disks(source, devices))
            outcome.checks_before.append(guestside.disks_read(read))
        outcome.checks_before.append(guestside.verify_memory(source, dirtier))
        outcome.verify_seconds += time.monotonic() - t_verify
        if not outcome.checks_before[-1].ok:
            raise RuntimeFailure(
                f"{address} fails verification before any migration: "
                f"{outcome.checks_before[-1].evidence}"
            )
        before = guestside.status(source)
        time.sleep(workload.warmup_s)
        after = guestside.status(source)
        if after.get("seconds", 0) > before.get("seconds", 0):
            outcome.dirty_seen_mibs = (
                (after.get("bytes", 0) - before.get("bytes", 0))
                / 1048576
                / (after["seconds"] - before["seconds"])
            )
    except BaseException:
        with deferred_signals(), contextlib.suppress(KvmlabError, OSError):
            guestside.stop_dirtier(source, dirtier)
        raise
    return Baseline(dirtier, digest, klines, read)


def verify_after(
    machine: Machine,
    dirtier: guestside.Dirtier,
    digest: str,
    klines: int,
    side: str,
    disks: tuple[guestside.DiskDigest, ...] = (),
) -> list[guestside.Check]:
    """Every check of a guest after a migration (or after one that did not happen); a
    guest that dies on the way fails the check it died in, with its serial log's tail."""
    if not machine.is_alive():
        return [
            guestside.Check(
                "QEMU", False, f"the {side} QEMU has exited: {serial_tail(machine.run_dir)}"
            )
        ]
    checks: list[guestside.Check] = []
    steps: list[tuple[str, Callable[[], guestside.Check]]] = [
        ("guest agent", lambda: guestside.check_agent(machine)),
        ("memory pattern", lambda: guestside.verify_memory(machine, dirtier)),
        ("file written before", lambda: guestside.check_file(machine, digest)),
        ("kernel log", lambda: guestside.check_kernel(machine, klines)),
    ]
    if disks:
        steps.insert(3, ("copied disks", lambda: guestside.check_disks(machine, list(disks))))
    for name, step in steps:
        try:
            checks.append(step())
        except KvmlabError as exc:
            tail = "" if machine.is_alive() else f"; serial: {serial_tail(machine.run_dir)}"
            checks.append(guestside.Check(name, False, f"{exc}{tail}"))
            break
        if not checks[-1].ok and name == "guest agent":
            break
    if not all(c.ok for c in checks):
        faults = kernel_faults(machine.run_dir)
        if faults:
            checks.append(guestside.Check("serial console", False, faults))
    return checks


def kernel_faults(run_dir: Path) -> str:
    """The guest kernel's first faults and its panic from the serial log, or ``""``."""
    from kvmlab.proc.processes import tail
    from kvmlab.render.runfiles import SERIAL_LOG

    lines = [x.strip() for x in tail(run_dir / SERIAL_LOG, 400) if x.strip()]
    worst = [x for x in lines if guestside.KERNEL_FAULT.search(x)]
    panic = [x for x in worst if "Kernel panic" in x]
    return " | ".join(dict.fromkeys([*worst[:2], *panic[:1]]))


def serial_tail(run_dir: Path) -> str:
    """The last lines of a guest's serial log, kernel faults first."""
    from kvmlab.proc.processes import tail
    from kvmlab.render.runfiles import SERIAL_LOG

    faults = kernel_faults(run_dir)
    if faults:  # the first faults and the panic, not the call traces after them
        return faults
    lines = [x.strip() for x in tail(run_dir / SERIAL_LOG, 40) if x.strip()]
    bad = [x for x in lines if guestside.BAD_KERNEL.search(x)]
    return " | ".join((bad or lines)[-3:]) or "(no serial output)"
