"""Tables never shorten or split a value: plain columns in a pipe, whole words on a terminal."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from kvmlab.report.grid import PAD_LIMIT, Col, fit_widths, print_grid
from kvmlab.report.text import print_table
from tests.report import data

COLUMNS = [Col("address"), Col("level"), Col("pid", "right"), Col("memory", "right")]
ROWS = [
    ["a-rather-long-lab/vm1", "L1", "5912345", "1 GiB"],
    ["b3/vm2", "L2", "77", "512 MiB"],
    ["c/d", "L1", "8", "[tap | vhost-user]"],
]


def render(terminal: bool, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, color_system=None)
    print_grid(
        console, COLUMNS, ROWS, title="guests in /a/long/path/to/the/run/root", caption="a caption"
    )
    return out.getvalue()


def test_plain_output_has_every_value_whole_and_no_trailing_spaces() -> None:
    text = render(terminal=False, width=20)
    lines = text.splitlines()
    assert lines[0] == "guests in /a/long/path/to/the/run/root"
    assert lines[1].split() == ["address", "level", "pid", "memory"]
    assert re.fullmatch(r"a-rather-long-lab/vm1\s+L1\s+5912345\s+1 GiB", lines[2])
    assert lines[4].endswith("[tap | vhost-user]"), "cells are not read as markup"
    assert lines[-1] == "a caption"
    assert "…" not in text and not any(line.endswith(" ") for line in lines)
    assert not re.search("[┏━│┃]", text), "no box characters in a pipe"


def test_plain_columns_align_and_right_justify() -> None:
    lines = render(terminal=False, width=80).splitlines()[1:5]
    assert len({line.index("L") for line in lines[1:]}) == 1, lines
    assert len({len(line) for line in lines}) == 1, "the last column is right-justified"
    assert lines[1].endswith("5912345               1 GiB")
    assert lines[2].endswith("     77             512 MiB")


def test_a_value_beyond_the_pad_limit_shifts_only_its_own_line() -> None:
    long = "x" * (PAD_LIMIT + 10)
    out = io.StringIO()
    print_grid(
        Console(file=out, width=50),
        [Col("key"), Col("type"), Col("note")],
        [["a", long, "n1"], ["b", "int", "n2"]],
    )
    head, first, second = out.getvalue().splitlines()
    assert first == f"a    {long}  n1"
    assert head.index("note") == second.index("n2") < first.index("n1")


@pytest.mark.parametrize("width", [200, 60, 30, 12])
def test_terminal_never_cuts_or_splits_a_word(width: int) -> None:
    text = render(terminal=True, width=width)
    assert "…" not in text
    for word in ("a-rather-long-lab/vm1", "5912345", "/a/long/path/to/the/run/root"):
        assert word in text, (width, text)


def test_terminal_fits_the_width_when_words_allow() -> None:
    text = render(terminal=True, width=60)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert "[tap |" in text, "the widest column gave way"
    assert "a-rather-long-lab/vm1" in text


def test_fit_widths_shrinks_the_widest_first_never_below_the_least() -> None:
    assert fit_widths([3, 4], [10, 5], 20) == [10, 5]
    assert fit_widths([3, 4], [10, 5], 10) == [5, 5]
    assert fit_widths([3, 4], [10, 5], 2) == [3, 4]


def test_level_table_in_a_pipe_is_plain_and_whole() -> None:
    out = io.StringIO()
    print_table(data.two_variants(), Console(file=out, width=40), "a title")
    text = out.getvalue()
    assert "…" not in text and not any(line.endswith(" ") for line in text.splitlines())
    header = text.splitlines()[1]
    assert "default L0 host (native)" in header and "tuned L2 l1/l2 (kvm)" in header
    assert re.search(r"disk\s+randread\s+IOPS ↑\s+48200 ±4%", text)


def test_level_table_change_keeps_its_colour_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300, force_terminal=True, color_system="standard")
    print_table(data.one_variant(), console, "t")
    assert "\x1b[31m-87.4%" in out.getvalue()  # a loss is red
