"""fio ``--output-format=json``: IOPS, bandwidth and latency per I/O direction.

Metric names start with the direction, prefixed with ``rand`` when the job's
``rw`` is random: ``randread_iops``, ``randwrite_bandwidth_mib_s``, ``read_clat_p99_us``.
Jobs doing the same direction are combined: IOPS and bandwidth are summed, the
mean latency is weighted by I/O count, and a completion-latency percentile is the
worst job's (exact with ``--group_reporting``, which reports one job per group).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from kvmlab.bench.parsers._common import Source
from kvmlab.bench.parsers.metric import Metric

_DIRECTIONS = ("read", "write", "trim")
_PERCENTILES = (("50.000000", "p50"), ("99.000000", "p99"), ("99.900000", "p99_9"))
_MIB = 1024 * 1024
_COMPLAINT = re.compile(r"^fio: (.+)$", re.MULTILINE)


def parse_fio(text: str) -> list[Metric]:
    """Metrics from fio's JSON output (one or more jobs, any ``rw``).

    Raises ParseError when the output is not fio JSON, a job reports an error,
    or no job did any I/O.
    """
    src = Source("fio", text)
    doc = src.json_object(_COMPLAINT)
    jobs = src.at(doc, "jobs")
    if not isinstance(jobs, list) or not jobs:
        raise src.error("no jobs in the output")
    by_key: dict[str, list[Mapping[str, object]]] = {}
    for job_obj in jobs:
        job = src.mapping(job_obj)
        _check_job(src, job)
        prefix = "rand" if _rw(doc, job).startswith("rand") else ""
        for direction in _DIRECTIONS:
            if direction not in job:
                continue
            stats = src.mapping(job, direction)
            if src.number(stats, "io_bytes") > 0:
                by_key.setdefault(prefix + direction, []).append(stats)
    if not by_key:
        raise src.error("no job completed any I/O")
    metrics: list[Metric] = []
    for key, parts in by_key.items():
        metrics.extend(_direction_metrics(src, key, parts))
    return metrics


def _check_job(src: Source, job: Mapping[str, object]) -> None:
    """Raise if fio reports an error for the job (its ``error`` is an errno)."""
    code = int(src.number(job, "error"))
    if code:
        name = job.get("jobname", "?")
        reason = os.strerror(code) if 0 < code < 4096 else "unknown error"
        raise src.error(f"job {name!r} failed with error {code} ({reason})")


def _rw(doc: Mapping[str, object], job: Mapping[str, object]) -> str:
    """The job's ``rw`` (alias ``readwrite``), from its options or the global ones."""
    for options in (job.get("job options"), doc.get("global options")):
        if isinstance(options, Mapping):
            for key in ("rw", "readwrite"):
                value = options.get(key)
                if isinstance(value, str):
                    return value
    return "read"  # fio's default


def _direction_metrics(
    src: Source, key: str, parts: Sequence[Mapping[str, object]]
) -> list[Metric]:
    """IOPS, MiB/s, mean latency and clat percentiles for one direction."""
    iops = sum(src.number(p, "iops") for p in parts)
    bw = sum(_bw_bytes(src, p) for p in parts) / _MIB
    metrics = [
        Metric(f"{key}_iops", iops, "IOPS", True),
        Metric(f"{key}_bandwidth_mib_s", bw, "MiB/s", True),
    ]
    for pct_key, label in _PERCENTILES:
        values = [_percentile(p, pct_key) for p in parts]
        present = [v for v in values if v is not None]
        if present and len(present) == len(values):
            metrics.append(Metric(f"{key}_clat_{label}_us", max(present) / 1000, "us", False))
    weighted = [(src.number(p, "lat_ns", "mean"), src.number(p, "lat_ns", "N")) for p in parts]
    ios = sum(n for _, n in weighted)
    if ios > 0:
        mean_ns = sum(mean * n for mean, n in weighted) / ios
        metrics.append(Metric(f"{key}_lat_mean_us", mean_ns / 1000, "us", False))
    return metrics


def _bw_bytes(src: Source, stats: Mapping[str, object]) -> float:
    """Bandwidth in bytes/s (``bw_bytes``; older fio has only ``bw`` in KiB/s)."""
    if "bw_bytes" in stats:
        return src.number(stats, "bw_bytes")
    return src.number(stats, "bw") * 1024


def _percentile(stats: Mapping[str, object], key: str) -> float | None:
    """A completion-latency percentile in ns, or None when fio did not report it."""
    clat = stats.get("clat_ns")
    table = clat.get("percentile") if isinstance(clat, Mapping) else None
    value = table.get(key) if isinstance(table, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
