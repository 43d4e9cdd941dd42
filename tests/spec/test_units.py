"""Sizes, CPU sets and MAC addresses as lab files write them."""

from __future__ import annotations

import pytest

from kvmlab.spec.units import (
    GIB,
    MIB,
    format_cpuset,
    format_size,
    parse_cpuset,
    parse_mac,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2G", 2 * GIB),
        ("512M", 512 * MIB),
        ("1GiB", GIB),
        ("1.5G", 1536 * MIB),
        (2048, 2 * GIB),
        ("64k", 64 * 1024),
        ("4096B", 4096),
        (" 3 g ", 3 * GIB),
    ],
)
def test_parse_size(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["2X", "", "-1G", "G", 0, -5, True, 1.5, "0.3K"])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_size(bad)


@pytest.mark.parametrize(
    ("size", "text"), [(2 * GIB, "2G"), (1536 * MIB, "1536M"), (1000, "1000B")]
)
def test_format_size(size: int, text: str) -> None:
    assert format_size(size) == text
    assert parse_size(text) == size


def test_cpuset_round_trip() -> None:
    assert parse_cpuset("0-3,6") == (0, 1, 2, 3, 6)
    assert parse_cpuset(5) == (5,)
    assert parse_cpuset([1, 2]) == (1, 2)
    assert format_cpuset((0, 1, 2, 3, 6, 8, 9)) == "0-3,6,8-9"


@pytest.mark.parametrize("bad", ["3-1", "a", "", "1,,2", True])
def test_cpuset_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_cpuset(bad)


def test_mac() -> None:
    assert parse_mac("52:54:00:AB:cd:01") == "52:54:00:ab:cd:01"
    with pytest.raises(ValueError, match="multicast"):
        parse_mac("01:00:5e:00:00:01")
    with pytest.raises(ValueError):
        parse_mac("52:54:00:ab:cd")
