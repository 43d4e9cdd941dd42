"""The counters provider: KVM's binary statistics through QMP ``query-stats``.

Counters only (no handling times, no port or MSR breakdown), read twice around the window:
nearly free, and available wherever QEMU >= 7.1 runs a KVM guest (``[]`` under TCG).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kvmlab.errors import HostError, QmpFailure
from kvmlab.exits.model import Profile

PROVIDER = "counters"
NOTE = "KVM binary statistics through QMP query-stats (counters only: no times, no breakdown)"
COUNTER_KINDS = {
    "io_exits": "io",
    "mmio_exits": "mmio",
    "halt_exits": "hlt",
    "irq_exits": "external_interrupt",
    "irq_window_exits": "interrupt_window",
    "nmi_window_exits": "nmi_window",
    "signal_exits": "signal",
    "request_irq_exits": "request_irq",
}
"""Counters that are a class of exits, and the kind they count."""


def sample(reply: list[dict[str, Any]]) -> tuple[dict[str, int], dict[int, int]]:
    """Totals over all vCPUs and the VM, and exits per vCPU, from ``query-stats`` replies
    (entries and statistics of another shape are left out: histograms, another provider)."""
    totals: dict[str, int] = {}
    per_vcpu: dict[int, int] = {}
    vcpu = 0
    for entry in reply:
        if not isinstance(entry, dict) or entry.get("provider") != "kvm":
            continue
        stats = entry.get("stats")
        values: dict[str, int] = {}
        for stat in stats if isinstance(stats, list) else []:
            if not isinstance(stat, dict) or type(stat.get("value")) is not int:
                continue  # a histogram, or not a statistic
            if isinstance(key := stat.get("name"), str):
                values[key] = stat["value"]
        for name, value in values.items():
            totals[name] = totals.get(name, 0) + value
        if "qom-path" in entry:
            per_vcpu[vcpu] = values.get("exits", 0)
            vcpu += 1
    return totals, per_vcpu


def query(execute: Callable[..., Any]) -> list[dict[str, Any]]:
    """Both ``query-stats`` targets (vm and vcpu) through a QMP ``execute``; a QEMU without
    the command (before 7.1) is a :class:`HostError`."""
    out: list[dict[str, Any]] = []
    for target in ("vm", "vcpu"):
        try:
            reply = execute("query-stats", {"target": target})
        except QmpFailure as exc:
            if getattr(exc.__cause__, "error_class", None) != "CommandNotFound":
                raise
            raise HostError(
                "this QEMU has no QMP query-stats (QEMU 7.1 and later have it), "
                "so KVM's counters cannot be read",
                ["profile with --provider tracepoints (root, tracefs) or perf"],
            ) from None
        if isinstance(reply, list):
            out.extend(e for e in reply if isinstance(e, dict))
    return out


def profile(
    address: str, execute: Callable[..., Any], seconds: float, sleep: Callable[[float], None]
) -> Profile:
    """Counters over ``seconds``: two samples, their difference."""
    start = time.monotonic()
    before, vcpus0 = sample(query(execute))
    sleep(seconds)
    after, vcpus1 = sample(query(execute))
    elapsed = time.monotonic() - start
    return from_samples(address, (before, vcpus0), (after, vcpus1), elapsed)


def from_samples(
    address: str,
    before: tuple[dict[str, int], dict[int, int]],
    after: tuple[dict[str, int], dict[int, int]],
    seconds: float,
) -> Profile:
    """The profile between two samples (counters that went backwards are left out)."""
    out = Profile(address=address, provider=PROVIDER, provider_note=NOTE, seconds=seconds)
    if not after[0]:
        out.partial = "query-stats returned no KVM statistics (is the guest under KVM?)"
        return out
    out.counters = {
        k: v - before[0].get(k, 0) for k, v in after[0].items() if v >= before[0].get(k, 0)
    }
    out.vcpus = {i: v - before[1].get(i, 0) for i, v in after[1].items()}
    return out
