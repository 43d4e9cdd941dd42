"""parse_time_seconds against GNU time 1.9, bash and busybox time (recorded)."""

from __future__ import annotations

import pytest

from kvmlab.bench.parsers import ParseError, parse_time_seconds
from tests.bench.recorded import recorded, values


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("time-gnu-gcc.txt", (0.08, 0.0, 0.02)),  # compiler warnings before the time line
        ("time-bash-p.txt", (0.23, 0.23, 0.0)),
        ("time-bash-builtin.txt", (0.226, 0.225, 0.0)),
        ("time-busybox.txt", (0.27, 0.26, 0.0)),
    ],
)
def test_formats(name: str, expected: tuple[float, float, float]) -> None:
    metrics = parse_time_seconds(recorded(name))
    assert values(metrics) == dict(zip(("elapsed_s", "user_s", "sys_s"), expected, strict=True))
    assert {(m.unit, m.higher_is_better) for m in metrics} == {("s", False)}


def test_minutes_are_counted() -> None:
    """Crafted in bash's format: a build longer than a minute."""
    text = "\nreal\t12m3.250s\nuser\t20m0.500s\nsys\t1m0.000s\n"
    assert values(parse_time_seconds(text)) == {
        "elapsed_s": 723.25,
        "user_s": 1200.5,
        "sys_s": 60.0,
    }


def test_failed_command() -> None:
    with pytest.raises(ParseError) as info:
        parse_time_seconds(recorded("time-gnu-gcc-failed.txt"))
    assert str(info.value) == (
        "time: the timed command failed: Command exited with non-zero status 1"
    )
    assert "  | cc1: fatal error: missing.c: No such file or directory" in info.value.lines()


@pytest.mark.parametrize("text", ["", "make: done\n", "real 1.0\nuser 0.5\n", "1.0 2.0\n"])
def test_no_timing(text: str) -> None:
    with pytest.raises(ParseError, match="time: "):
        parse_time_seconds(text)
