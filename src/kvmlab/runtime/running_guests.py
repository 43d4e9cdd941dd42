"""The running guests as ``kvmlab ps`` lists them: each guest's record and state, host CPU
next to guest CPU sampled over one window, and (when asked) its QEMU's threads."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.runtime.rundir import GuestEntry, GuestRecord, running_labs

if TYPE_CHECKING:
    from kvmlab.runtime.thread_cpu import Threads

Usage = dict[int, tuple[float | None, float | None]]
"""Host and guest CPU% by QEMU pid."""


def running_guests(threads: bool = False) -> list[dict[str, object]]:
    """A row per guest of every running lab, as ``kvmlab ps -o json`` prints them
    (``threads``: with each QEMU's threads split into guest, host kernel and QEMU user
    time, measured over the same window)."""
    entries = [e for lab_dir in running_labs() for e in lab_dir.entries()]
    rows = [
        (e.run_dir, e.record) for e in entries if e.record is not None and e.state() == "running"
    ]
    if threads:
        usage, seen = _with_threads(rows, lambda: _sample(rows))
    else:
        usage, seen = _sample(rows), {}
    now = time.time()
    out = [_row(entry, usage, now) for entry in entries]
    if threads:
        for row in out:
            measured = seen.get(str(row["address"]))
            row["threads"] = None if measured is None else measured.threads
            row["threads_where"] = None if measured is None else measured.where
            row["threads_problem"] = None if measured is None else measured.problem
    return out


def _row(entry: GuestEntry, usage: Usage, now: float) -> dict[str, object]:
    rec, state = entry.record, entry.state()
    pids = entry.processes()
    row: dict[str, object] = {
        "lab": entry.lab,
        "guest": "/".join(entry.address),
        "address": entry.name,
        "level": f"L{len(entry.address)}",
        "state": state,
        "pid": rec.pid if rec is not None and rec.pid else (pids[0] if pids else None),
        "problem": entry.problem,
    }
    if rec is not None:
        host_cpu, guest_cpu = usage.get(rec.pid, (None, None))
        row.update(
            {
                "accel": rec.accel,
                "vcpus": rec.vcpus,
                "memory_bytes": rec.memory,
                "uptime_s": round(now - rec.started, 1),
                "host_cpu_pct": None if rec.via else host_cpu,
                "guest_cpu_pct": guest_cpu,
                "via": rec.via,
                "boot_s": rec.boot,
            }
        )
    return row


def _sample(rows: list[tuple[Path, GuestRecord]]) -> Usage:
    """Host and guest CPU of the running guests; with none running, what reaches their
    agents (both backends) is not even imported."""
    if not rows:
        return {}
    from kvmlab.runtime.cpu_compare import sample_usage

    return sample_usage(rows)


def _with_threads(
    rows: list[tuple[Path, GuestRecord]], sample: Callable[[], Usage]
) -> tuple[Usage, dict[str, Threads]]:
    """``sample()``'s host and guest CPU, and the QEMU threads of every running guest over
    the same window: read here for a QEMU of this host, by the kvmlab inside its guest
    hypervisor for a nested guest (once per hypervisor)."""
    from kvmlab.runtime.nested import inner_address
    from kvmlab.runtime.thread_cpu import Threads, read_threads, thread_use

    here = [rec for _, rec in rows if rec.via is None and rec.pid]
    before = {rec.pid: read_threads(rec.pid) for rec in here}
    t0 = time.monotonic()
    usage = sample()
    seconds = time.monotonic() - t0
    seen = {
        rec.name: Threads(
            "this host",
            [t.to_json() for t in thread_use(before[rec.pid], read_threads(rec.pid), seconds)],
        )
        for rec in here
    }
    inside: dict[tuple[str, str], dict[str, list[dict[str, object]]] | str] = {}
    for _, rec in rows:
        if rec.via is None:
            continue
        key, where = (rec.lab, rec.via), f"inside {rec.lab}/{rec.via}"
        if key not in inside:
            inside[key] = _threads_in(rec)
        found = inside[key]
        if isinstance(found, str):  # why that kvmlab could not say
            seen[rec.name] = Threads(where, [], found)
        elif inner_address(rec) in found:
            seen[rec.name] = Threads(where, found[inner_address(rec)])
        else:
            seen[rec.name] = Threads(where, [], "the kvmlab there does not list it")
    return usage, seen


def _threads_in(rec: GuestRecord) -> dict[str, list[dict[str, object]]] | str:
    """What the kvmlab inside a nested guest's hypervisor measures, or why it could not."""
    from kvmlab.errors import KvmlabError
    from kvmlab.runtime.nested import hypervisor_of
    from kvmlab.runtime.thread_cpu import threads_inside

    hyper = hypervisor_of(rec)
    if hyper is None:
        return "its guest hypervisor's record is gone"
    try:
        return threads_inside(hyper)
    except KvmlabError as exc:
        return str(exc)
    finally:
        hyper.disconnect()
