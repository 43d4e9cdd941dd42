"""Every parser on every recorded file, truncated copies and garbage: metrics or ParseError.

Nothing else may escape (KeyError, IndexError, ValueError, TypeError ...), and
every metric follows the naming convention for its unit and direction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest

from kvmlab.bench.parsers import PARSERS, Metric, ParseError
from kvmlab.errors import KvmlabError
from tests.bench.recorded import DATA

Parser = Callable[[str], list[Metric]]
FILES = sorted(p.name for p in DATA.iterdir() if p.name != "README.md")

# name pattern -> (unit, higher_is_better)
CONVENTION = [
    (r"(rand)?(read|write|trim)_iops", ("IOPS", True)),
    (r".*bandwidth_mib_s", ("MiB/s", True)),
    (r".*_us", ("us", False)),
    (r".*_ms", ("ms", False)),
    (r".*_gbit_s", ("Gbit/s", True)),
    (r".*_mpps", ("Mpps", True)),
    (r"events_per_s", ("events/s", True)),
    (r"ops_per_s", ("ops/s", True)),
    (r".*_bogo_ops_per_(cpu_)?s", ("bogo-ops/s", True)),
    (r"(elapsed|user|sys)_s", ("s", False)),
    (r".*_pct", ("%", False)),
    (r"retransmits", ("count", False)),
]

GARBAGE = [
    "",
    "\n\n",
    "garbage",
    "{",
    "{}",
    "[]",
    "null",
    '{"jobs": []}',
    '{"jobs": [1]}',
    '{"jobs": {"read": 1}}',
    '{"jobs": [{"error": "x"}]}',
    '{"jobs": [{"error": 0, "read": {"io_bytes": 1, "iops": "many"}}]}',
    '{"jobs": [{"error": 0, "read": {"io_bytes": 1, "iops": true}}]}',
    '{"jobs": [{"error": 0, "read": {"io_bytes": 1, "iops": NaN}}]}',
    '{"jobs": [{"error": 1e400}]}',
    '{"jobs": [{"error": 99999999999999999999}]}',
    '{"end": {"sum_sent": {"bits_per_second": Infinity}}}',
    '{"end": []}',
    '{"end": {"sum_sent": {"bits_per_second": 1}}}',
    '{"end": {"sum_sent": null, "sum_received": {}}}',
    "5 packets transmitted, 5 received, 0% packet loss\nrtt min/avg/max/mdev = 1/2 ms\n",
    "events per second: 1.2.3\n",
    "metrics:\n    - stressor: cpu\n      bogo-ops-per-second-real-time: fast\n",
    "metrics:\n    - stressor: cpu\n      bogo-ops-per-second-real-time: nan\n"
    "      bogo-ops-per-second-usr-sys-time: inf\n",
    "\x00\xff\ufffd" * 10,
]


def _check(parse: Parser, text: str) -> None:
    try:
        metrics = parse(text)
    except ParseError as exc:
        assert isinstance(exc, KvmlabError)
        assert exc.exit_code == 3
        assert str(exc).startswith(f"{exc.tool}: ")
        assert len(exc.excerpt) <= 7
        return
    assert metrics, "a parser returns metrics or raises"
    for metric in metrics:
        assert math.isfinite(metric.value), metric


@pytest.mark.parametrize("parser", sorted(PARSERS))
@pytest.mark.parametrize("text", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage(parser: str, text: str) -> None:
    with pytest.raises(ParseError):
        PARSERS[parser](text)


@pytest.mark.parametrize("parser", sorted(PARSERS))
@pytest.mark.parametrize("name", FILES)
def test_any_recording_truncated_anywhere(parser: str, name: str) -> None:
    """Each parser on each file (its own and the others') cut at 40 places."""
    text = (DATA / name).read_text()
    for cut in sorted({len(text) * i // 40 for i in range(41)}):
        _check(PARSERS[parser], text[:cut])


@pytest.mark.parametrize("parser", sorted(PARSERS))
@pytest.mark.parametrize("name", FILES)
def test_naming_convention(parser: str, name: str) -> None:
    try:
        metrics = PARSERS[parser]((DATA / name).read_text())
    except ParseError:
        return
    for metric in metrics:
        rules = [want for pattern, want in CONVENTION if re.fullmatch(pattern, metric.name)]
        assert rules, f"{metric.name} follows no naming rule"
        assert (metric.unit, metric.higher_is_better) == rules[0], metric


def test_excerpt_keeps_head_and_tail() -> None:
    text = "\n".join(f"line {i}" for i in range(100)) + "\n" + "x" * 500
    with pytest.raises(ParseError) as info:
        PARSERS["ping"](text)
    assert info.value.excerpt == [
        "line 0",
        "line 1",
        "line 2",
        "[... 95 lines ...]",
        "line 98",
        "line 99",
        "x" * 157 + "...",
    ]
