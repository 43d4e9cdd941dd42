"""The command lines of tools more than one workload runs (iperf3, ping, stress-ng's fork
stressor), each spelled once: the ``network`` workload and ``netcompare`` run the same
iperf3 and ping, ``fork`` and the ``exits`` load the same stressor."""

from __future__ import annotations


def iperf3_client(
    host: str,
    port: int,
    seconds: float,
    *,
    streams: int = 1,
    udp_payload: int | None = None,
    reverse: bool = False,
    connect_timeout_ms: int | None = None,
) -> list[str]:
    """iperf3's client, JSON report: TCP with ``streams`` (``-P``), or UDP at full rate with
    ``udp_payload``-byte datagrams; ``reverse``: the server sends."""
    argv = ["iperf3", "-c", host, "-p", str(port)]
    if udp_payload is None:
        argv += ["-P", str(streams)]
    argv += ["-t", f"{seconds:g}", "--json"]
    if udp_payload is not None:
        argv += ["-u", "-b", "0", "-l", str(udp_payload)]
    if connect_timeout_ms is not None:
        argv += ["--connect-timeout", str(connect_timeout_ms)]
    return [*argv, "-R"] if reverse else argv


def iperf3_server(bind: str, port: int, once: bool = False) -> list[str]:
    """iperf3's server bound to one address (``once``: it ends after one test)."""
    return ["iperf3", "-s", *(["-1"] if once else []), "-B", bind, "-p", str(port)]


def ping(
    host: str, count: int, interval: float, *, quiet: bool = False, wait_s: int | None = None
) -> list[str]:
    """``count`` echo requests ``interval`` seconds apart (``quiet``: the summary only, no
    line per reply; ``wait_s``: how long to wait for each reply)."""
    return [
        "ping",
        *(["-q"] if quiet else []),
        "-c",
        str(count),
        "-i",
        f"{interval:g}",
        *(["-W", str(wait_s)] if wait_s is not None else []),
        host,
    ]


def fork_stressor(vcpus: int, seconds: float) -> list[str]:
    """stress-ng's fork stressor on ``vcpus`` workers for ``seconds`` (at least 1 s), its
    report options to be added: processes created, run and reaped, page-table work."""
    return ["stress-ng", "--fork", str(vcpus), "--timeout", f"{max(1, round(seconds))}s"]
