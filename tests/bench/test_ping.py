"""parse_ping against recorded iputils 20221126 and busybox 1.35.0 ping on loopback."""

from __future__ import annotations

import pytest

from kvmlab.bench.parsers import ParseError, parse_ping
from tests.bench.recorded import recorded, values

# file -> rtt min, avg, max, mdev (iputils only) in ms, packet loss in %
CASES: dict[str, tuple[float, float, float, float | None, float]] = {
    "ping-iputils-lo.txt": (0.043, 0.045, 0.050, 0.002, 0),
    "ping-iputils-lo-quiet.txt": (0.023, 0.042, 0.051, 0.010, 0),
    "ping-iputils-half-loss.txt": (0.043, 0.046, 0.053, 0.003, 50),
    "ping-busybox-lo.txt": (0.077, 0.087, 0.108, None, 0),
    "ping-busybox-lo-quiet.txt": (0.052, 0.066, 0.075, None, 0),
    "ping-busybox-half-loss.txt": (0.069, 0.073, 0.082, None, 50),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_summary(name: str) -> None:
    low, avg, high, mdev, loss = CASES[name]
    expected = {"rtt_min_ms": low, "rtt_avg_ms": avg, "rtt_max_ms": high}
    if mdev is not None:
        expected["rtt_mdev_ms"] = mdev
    expected["packet_loss_pct"] = loss
    metrics = parse_ping(recorded(name))
    assert values(metrics) == expected
    for m in metrics:
        assert (m.unit, m.higher_is_better) == ("%" if m.name == "packet_loss_pct" else "ms", False)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ping-iputils-noreply.txt", "no reply: 2 packets transmitted, 0 received (100% loss)"),
        ("ping-busybox-noreply.txt", "no reply: 2 packets transmitted, 0 received (100% loss)"),
        ("ping-iputils-netns-lo-down.txt", "connect: Network is unreachable"),
        ("ping-busybox-netns-lo-down.txt", "sendto: Network is unreachable"),
    ],
)
def test_failures(name: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_ping(recorded(name))
    assert str(info.value) == f"ping: {message}"


def test_iputils_errors_and_fractional_loss() -> None:
    """Crafted from iputils' format (not recorded: needs an unreachable peer)."""
    text = (
        "--- 10.0.0.9 ping statistics ---\n"
        "3 packets transmitted, 2 received, +1 errors, 33.3333% packet loss, time 2003ms\n"
        "rtt min/avg/max/mdev = 0.300/0.350/0.400/0.050 ms\n"
    )
    assert values(parse_ping(text))["packet_loss_pct"] == 33.3333
