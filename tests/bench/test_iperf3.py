"""parse_iperf3 against recorded iperf 3.12 ``--json`` client output on loopback."""

from __future__ import annotations

import pytest

from kvmlab.bench.parsers import ParseError, parse_iperf3
from tests.bench.recorded import by_name, recorded, values

# file -> end.sum_sent.bits_per_second, end.sum_received.bits_per_second, retransmits
TCP = {
    "iperf3-P4-json.json": (15582502454.769226, 15582122084.363289, 20),
    "iperf3-P30-json.json": (14430593928.491117, 13748642210.827816, 64),
    "iperf3-P4-reverse-json.json": (12421363297.908346, 12462226936.653166, 8),
}


@pytest.mark.parametrize("name", sorted(TCP))
def test_tcp(name: str) -> None:
    sent, received, retransmits = TCP[name]
    assert values(parse_iperf3(recorded(name))) == {
        "sent_gbit_s": sent / 1e9,
        "received_gbit_s": received / 1e9,
        "retransmits": retransmits,
    }


def test_udp_adds_jitter_and_loss() -> None:
    assert values(parse_iperf3(recorded("iperf3-udp-1G-json.json"))) == {
        "sent_gbit_s": 999515091.396344 / 1e9,
        "received_gbit_s": 969831937.478502 / 1e9,
        "jitter_ms": 0.004925712891496035,
        "packet_loss_pct": 2.963545764489903,
    }


def test_units() -> None:
    tcp = by_name(parse_iperf3(recorded("iperf3-P4-json.json")))
    udp = by_name(parse_iperf3(recorded("iperf3-udp-1G-json.json")))
    assert [(m.unit, m.higher_is_better) for m in tcp.values()] == [
        ("Gbit/s", True),
        ("Gbit/s", True),
        ("count", False),
    ]
    assert (udp["jitter_ms"].unit, udp["jitter_ms"].higher_is_better) == ("ms", False)
    assert (udp["packet_loss_pct"].unit, udp["packet_loss_pct"].higher_is_better) == ("%", False)


@pytest.mark.parametrize("name", ["iperf3-noserver.json", "iperf3-noserver.txt"])
def test_no_server(name: str) -> None:
    """iperf3 3.12 exits 0 with --json here: the error key is what tells."""
    with pytest.raises(ParseError) as info:
        parse_iperf3(recorded(name))
    assert str(info.value) == "iperf3: unable to connect to server: Connection refused"
    assert any("Connection refused" in line for line in info.value.lines()[1:])


def test_error_after_partial_results_still_fails() -> None:
    text = recorded("iperf3-P4-json.json").rstrip()
    text = text[: text.rindex("}")] + ',\n\t"error": "control socket has closed unexpectedly"\n}'
    with pytest.raises(ParseError, match="control socket has closed unexpectedly"):
        parse_iperf3(text)
