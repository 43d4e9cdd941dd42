"""parse_sysbench_cpu / parse_sysbench_memory against recorded sysbench 1.0.20 reports."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kvmlab.bench.parsers import Metric, ParseError, parse_sysbench_cpu, parse_sysbench_memory
from tests.bench.recorded import by_name, recorded, values


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sysbench-cpu-threads1.txt", (3041.04, 0.33, 0.24, 12.37)),
        ("sysbench-cpu-threads2.txt", (3171.02, 0.63, 4.25, 20.25)),
    ],
)
def test_cpu(name: str, expected: tuple[float, float, float, float]) -> None:
    got = values(parse_sysbench_cpu(recorded(name)))
    keys = ("events_per_s", "latency_avg_ms", "latency_p95_ms", "latency_max_ms")
    assert got == dict(zip(keys, expected, strict=True))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sysbench-memory-threads2.txt", (4241.68, 4343484.31, 0.0, 0.0, 20.03)),
        ("sysbench-memory-read-rnd.txt", (1960.99, 2008050.41, 0.0, 0.0, 40.0)),
        ("sysbench-memory-seq1m-tcg-guest.txt", (5287.15, 5287.15, 0.18, 0.24, 11.88)),
    ],
)
def test_memory(name: str, expected: tuple[float, ...]) -> None:
    got = values(parse_sysbench_memory(recorded(name)))
    keys = ("bandwidth_mib_s", "ops_per_s", "latency_avg_ms", "latency_p95_ms", "latency_max_ms")
    assert got == dict(zip(keys, expected, strict=True))


def test_units() -> None:
    cpu = by_name(parse_sysbench_cpu(recorded("sysbench-cpu-threads1.txt")))
    assert (cpu["events_per_s"].unit, cpu["events_per_s"].higher_is_better) == ("events/s", True)
    mem = by_name(parse_sysbench_memory(recorded("sysbench-memory-threads2.txt")))
    assert (mem["bandwidth_mib_s"].unit, mem["bandwidth_mib_s"].higher_is_better) == (
        "MiB/s",
        True,
    )
    assert (mem["ops_per_s"].unit, mem["ops_per_s"].higher_is_better) == ("ops/s", True)
    for metric in [*cpu.values(), *mem.values()]:
        if metric.name.startswith("latency_"):
            assert (metric.unit, metric.higher_is_better) == ("ms", False)


def test_other_percentile_is_named_after_it() -> None:
    text = recorded("sysbench-cpu-threads1.txt").replace("95th percentile", "99th percentile")
    assert values(parse_sysbench_cpu(text))["latency_p99_ms"] == 0.24


@pytest.mark.parametrize("parse", [parse_sysbench_cpu, parse_sysbench_memory])
def test_fatal_error_is_reported(parse: Callable[[str], list[Metric]]) -> None:
    with pytest.raises(ParseError) as info:
        parse(recorded("sysbench-bad-test.txt"))
    assert str(info.value) == (
        "sysbench: Cannot find benchmark 'nosuchtest': no such built-in test, file or module"
    )


def test_wrong_test_is_named() -> None:
    with pytest.raises(ParseError, match=r"is this sysbench cpu\?"):
        parse_sysbench_cpu(recorded("sysbench-memory-threads2.txt"))
    with pytest.raises(ParseError, match=r"is this sysbench memory\?"):
        parse_sysbench_memory(recorded("sysbench-cpu-threads1.txt"))
