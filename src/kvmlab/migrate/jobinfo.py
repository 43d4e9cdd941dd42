"""libvirt's migration job statistics (``virDomainGetJobStats``), as ``virsh domjobinfo``
labels them."""

from __future__ import annotations

from typing import Any

JOB_NAMES = {
    "time_elapsed": "Time elapsed (ms)",
    "downtime": "Total downtime (ms)",
    "setup_time": "Setup time (ms)",
    "data_total": "Data total (B)",
    "data_processed": "Data processed (B)",
    "data_remaining": "Data remaining (B)",
    "memory_total": "Memory total (B)",
    "memory_processed": "Memory processed (B)",
    "memory_remaining": "Memory remaining (B)",
    "memory_bps": "Memory bandwidth (B/s)",
    "memory_dirty_rate": "Dirty rate (pages/s)",
    "memory_page_size": "Page size (B)",
    "memory_iteration": "Iteration",
    "memory_postcopy_requests": "Postcopy requests",
    "memory_constant": "Constant pages",
    "memory_normal": "Normal pages",
    "memory_normal_bytes": "Normal data (B)",
    "compression_cache": "Compression cache (B)",
    "compression_bytes": "Compressed data (B)",
    "compression_pages": "Compressed pages",
    "compression_cache_misses": "Compression cache misses",
    "auto_converge_throttle": "Auto converge throttle (%)",
}
"""libvirt's job statistics (``VIR_DOMAIN_JOB_*``) and the labels ``virsh domjobinfo`` gives
them."""


def job_stats(raw: dict[str, Any]) -> dict[str, float]:
    """The numbers of a ``virDomainGetJobStats`` reply, by libvirt's field names."""
    return {k: float(v) for k, v in raw.items() if k in JOB_NAMES and isinstance(v, int | float)}


def domjobinfo(stats: dict[str, float]) -> list[str]:
    """``virsh domjobinfo``'s lines for these statistics (only what libvirt reported)."""
    return [f"{JOB_NAMES[k]}: {stats[k]:.0f}" for k in JOB_NAMES if k in stats]
