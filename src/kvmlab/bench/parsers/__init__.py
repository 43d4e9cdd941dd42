"""Parsers of benchmark tool outputs: text in, a list of :class:`Metric` out.

Each parser is a pure function of the tool's output (no process is started).
Output that holds no usable result (the tool's own error report, a truncated
run, something else entirely) raises :class:`ParseError`, never KeyError or
IndexError.
"""

from __future__ import annotations

from collections.abc import Callable

from kvmlab.bench.parsers.errors import ParseError
from kvmlab.bench.parsers.fio import parse_fio
from kvmlab.bench.parsers.iperf3 import parse_iperf3, parse_iperf3_udp
from kvmlab.bench.parsers.metric import Metric
from kvmlab.bench.parsers.ping import parse_ping, parse_ping_replies
from kvmlab.bench.parsers.stress_ng import parse_stress_ng
from kvmlab.bench.parsers.sysbench import parse_sysbench_cpu, parse_sysbench_memory
from kvmlab.bench.parsers.timing import parse_time_seconds

PARSERS: dict[str, Callable[[str], list[Metric]]] = {
    "fio": parse_fio,
    "iperf3": parse_iperf3,
    "iperf3-udp": parse_iperf3_udp,
    "ping": parse_ping,
    "ping-replies": parse_ping_replies,
    "stress-ng": parse_stress_ng,
    "sysbench-cpu": parse_sysbench_cpu,
    "sysbench-memory": parse_sysbench_memory,
    "time": parse_time_seconds,
}
"""Every parser by the name a workload definition can refer to it with."""

__all__ = [
    "PARSERS",
    "Metric",
    "ParseError",
    "parse_fio",
    "parse_iperf3",
    "parse_iperf3_udp",
    "parse_ping",
    "parse_ping_replies",
    "parse_stress_ng",
    "parse_sysbench_cpu",
    "parse_sysbench_memory",
    "parse_time_seconds",
]
