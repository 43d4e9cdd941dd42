"""iperf3 ``--json`` client reports (TCP or UDP, any ``-P``)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kvmlab.bench.parsers._common import Source
from kvmlab.bench.parsers.metric import Metric

_TEXT_ERROR = re.compile(r"^iperf3: error - (.+)$", re.MULTILINE)


def parse_iperf3(text: str) -> list[Metric]:
    """Sum over streams: ``sent_gbit_s``, ``received_gbit_s`` (1 Gbit = 10^9 bits).

    TCP adds ``retransmits`` (when the sender reports them); UDP adds
    ``jitter_ms`` and ``packet_loss_pct``. An ``"error"`` in the JSON (iperf3 3.12
    exits 0 even then) or iperf3's plain-text error line raises ParseError with
    iperf3's own message, e.g. "unable to connect to server: Connection refused".
    """
    src = Source("iperf3", text)
    doc = src.json_object(_TEXT_ERROR)
    if "error" in doc:
        raise src.error(str(doc["error"]))
    end = src.mapping(doc, "end")
    sent = src.mapping(end, "sum_sent")
    metrics = [
        Metric("sent_gbit_s", src.number(sent, "bits_per_second") / 1e9, "Gbit/s", True),
        Metric(
            "received_gbit_s",
            src.number(end, "sum_received", "bits_per_second") / 1e9,
            "Gbit/s",
            True,
        ),
    ]
    if "retransmits" in sent:
        metrics.append(Metric("retransmits", src.number(sent, "retransmits"), "count", False))
    udp = end.get("sum")
    if _protocol(doc) == "UDP" and udp is not None:
        metrics.append(Metric("jitter_ms", src.number(udp, "jitter_ms"), "ms", False))
        metrics.append(Metric("packet_loss_pct", src.number(udp, "lost_percent"), "%", False))
    return metrics


def parse_iperf3_udp(text: str) -> list[Metric]:
    """A UDP run's packet rates from its ``--json`` report: ``sent_mpps`` and
    ``received_mpps`` (millions of datagrams a second) and ``lost_pct`` (of those sent).
    iperf3's own error, in its JSON or as its text line, raises ParseError."""
    src = Source("iperf3", text)
    doc = src.json_object(_TEXT_ERROR)
    if "error" in doc:
        raise src.error(str(doc["error"]))
    total = src.mapping(src.mapping(doc, "end"), "sum")
    seconds = src.number(total, "seconds")
    packets, lost = src.number(total, "packets"), src.number(total, "lost_packets")
    if seconds <= 0 or packets <= 0:
        raise src.error("no UDP packets were sent")
    return [
        Metric("sent_mpps", packets / seconds / 1e6, "Mpps", True),
        Metric("received_mpps", (packets - lost) / seconds / 1e6, "Mpps", True),
        Metric("lost_pct", 100.0 * lost / packets, "%", False),
    ]


def _protocol(doc: Mapping[str, object]) -> str:
    """``TCP`` or ``UDP`` from ``start.test_start.protocol`` (TCP when absent)."""
    start = doc.get("start")
    test = start.get("test_start") if isinstance(start, Mapping) else None
    protocol = test.get("protocol") if isinstance(test, Mapping) else None
    return protocol if isinstance(protocol, str) else "TCP"
