"""sysbench 1.0 ``cpu run`` and ``memory run`` text reports."""

from __future__ import annotations

import re

from kvmlab.bench.parsers._common import NUMBER, Source
from kvmlab.bench.parsers.metric import Metric

_FATAL = re.compile(r"^FATAL: (.+)$", re.MULTILINE)
_EVENTS = re.compile(rf"^\s*events per second:\s+({NUMBER})\s*$", re.MULTILINE)
_OPERATIONS = re.compile(rf"^Total operations: \d+ \(\s*({NUMBER}) per second\)", re.MULTILINE)
_TRANSFERRED = re.compile(rf"^{NUMBER} MiB transferred \(\s*({NUMBER}) MiB/sec\)", re.MULTILINE)
_LAT_AVG = re.compile(rf"^\s*avg:\s+({NUMBER})\s*$", re.MULTILINE)
_LAT_MAX = re.compile(rf"^\s*max:\s+({NUMBER})\s*$", re.MULTILINE)
_LAT_PCT = re.compile(rf"^\s*(\d+)th percentile:\s+({NUMBER})\s*$", re.MULTILINE)


def parse_sysbench_cpu(text: str) -> list[Metric]:
    """``events_per_s`` and latency (avg, percentile, max) of ``sysbench cpu run``."""
    src = _source(text)
    events = float(src.search(_EVENTS, "'events per second' (is this sysbench cpu?)").group(1))
    return [Metric("events_per_s", events, "events/s", True), *_latency(src)]


def parse_sysbench_memory(text: str) -> list[Metric]:
    """``bandwidth_mib_s``, ``ops_per_s`` and latency of ``sysbench memory run``."""
    src = _source(text)
    mib_s = float(src.search(_TRANSFERRED, "'MiB transferred' (is this sysbench memory?)").group(1))
    ops = float(src.search(_OPERATIONS, "'Total operations'").group(1))
    return [
        Metric("bandwidth_mib_s", mib_s, "MiB/s", True),
        Metric("ops_per_s", ops, "ops/s", True),
        *_latency(src),
    ]


def _source(text: str) -> Source:
    """The output, refused at once if sysbench reported a fatal error."""
    src = Source("sysbench", text)
    fatal = _FATAL.search(text)
    if fatal:
        raise src.error(fatal.group(1))
    return src


def _latency(src: Source) -> list[Metric]:
    """The ``Latency (ms):`` section: avg, the Nth percentile (if reported) and max."""
    avg = float(src.search(_LAT_AVG, "latency 'avg:'").group(1))
    metrics = [Metric("latency_avg_ms", avg, "ms", False)]
    pct = _LAT_PCT.search(src.text)
    if pct:
        metrics.append(Metric(f"latency_p{pct.group(1)}_ms", float(pct.group(2)), "ms", False))
    top = float(src.search(_LAT_MAX, "latency 'max:'").group(1))
    metrics.append(Metric("latency_max_ms", top, "ms", False))
    return metrics
