"""ping summaries from iputils and busybox (``-q`` or not), and the replies ping printed."""

from __future__ import annotations

import re

from kvmlab.bench.parsers._common import NUMBER, Source
from kvmlab.bench.parsers.metric import Metric

# iputils: "5 packets transmitted, 5 received, +1 errors, 0% packet loss, time 813ms"
# busybox: "5 packets transmitted, 5 packets received, 0% packet loss"
_COUNTS = re.compile(
    rf"^(\d+) packets transmitted, (\d+) (?:packets )?received,"
    rf"(?:[^,\n]*,)*? ({NUMBER})% packet loss",
    re.MULTILINE,
)
# iputils: "rtt min/avg/max/mdev = 0.043/0.045/0.050/0.002 ms"
# busybox: "round-trip min/avg/max = 0.047/0.066/0.073 ms"
_RTT = re.compile(
    rf"^(?:rtt|round-trip) ([a-z]+(?:/[a-z]+)+) = ({NUMBER}(?:/{NUMBER})+) ms", re.MULTILINE
)
_ERROR = re.compile(r"^ping: (.+)$", re.MULTILINE)
# "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.045 ms"
_TIME = re.compile(rf"\btime[=<]({NUMBER}) ms")


def parse_ping(text: str) -> list[Metric]:
    """``rtt_{min,avg,max}_ms`` (+ ``rtt_mdev_ms`` from iputils) and ``packet_loss_pct``.

    Raises ParseError when no reply came back (100% loss) or ping failed before
    its summary (e.g. "connect: Network is unreachable").
    """
    src = Source("ping", text)
    counts = _COUNTS.search(text)
    if counts is None:
        failure = _ERROR.search(text)
        raise src.error(failure.group(1) if failure else "no ping statistics in the output")
    sent, received, loss = int(counts.group(1)), int(counts.group(2)), float(counts.group(3))
    if received == 0:
        raise src.error(f"no reply: {sent} packets transmitted, 0 received ({loss:g}% loss)")
    rtt = src.search(_RTT, "round-trip times")
    names = rtt.group(1).split("/")
    values = rtt.group(2).split("/")
    if len(names) != len(values):
        raise src.error(f"round-trip line has {len(names)} names but {len(values)} values")
    metrics = [
        Metric(f"rtt_{name}_ms", float(value), "ms", False)
        for name, value in zip(names, values, strict=True)
    ]
    metrics.append(Metric("packet_loss_pct", loss, "%", False))
    return metrics


def parse_ping_replies(text: str) -> list[Metric]:
    """``rtt_p99_ms``: the 99th percentile (nearest rank) of the round trips of the replies
    ping printed one a line (not ``-q``). Raises ParseError when it printed none."""
    times = sorted(float(m.group(1)) for m in _TIME.finditer(text))
    if not times:
        raise Source("ping", text).error("no round trip in the output")
    rank = max(0, -(-99 * len(times) // 100) - 1)
    return [Metric("rtt_p99_ms", times[rank], "ms", False)]
