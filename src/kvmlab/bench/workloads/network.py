"""The ``network`` workload: iperf3 to and from the level below (-P streams, JSON) and ping
round trips to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.bench import tools
from kvmlab.bench.parsers.iperf3 import parse_iperf3
from kvmlab.bench.parsers.ping import parse_ping
from kvmlab.bench.registry import LevelWorkload, Settings, Step, register

if TYPE_CHECKING:
    from kvmlab.bench.executor import Place

IPERF3_PORT = 5299


def steps(place: Place, s: Settings) -> list[Step]:
    if place.parent_addr is None:
        return []
    server = tools.iperf3_server("127.0.0.1", IPERF3_PORT, once=True)
    host = place.parent_addr

    def iperf(name: str, reverse: bool) -> Step:
        argv = tools.iperf3_client(
            host,
            IPERF3_PORT,
            s.duration,
            streams=s.iperf3_streams,
            reverse=reverse,
            connect_timeout_ms=5000,
        )
        return Step(
            name, argv, parse_iperf3, s.duration + 60, keep=("received_gbit_s",), server=server
        )

    ping_argv = tools.ping(host, s.ping_count, 0.2, quiet=True)
    ping = Step(
        "ping", ping_argv, parse_ping, s.ping_count * 0.2 + 30, keep=("rtt_avg_ms", "rtt_mdev_ms")
    )
    return [iperf("to_parent", reverse=False), iperf("from_parent", reverse=True), ping]


register(
    LevelWorkload(
        "network",
        order=40,
        steps=steps,
        metrics=(
            "to_parent_received_gbit_s",
            "from_parent_received_gbit_s",
            "ping_rtt_avg_ms",
            "ping_rtt_mdev_ms",
        ),
        suites=("quick", "full"),
        needs=("parent",),
    )
)
