"""``kvmlab ps --threads`` as text, from a recorded real answer: the timer-storm lab's
``ps --threads -o json`` (its L1 under TCG on this host, its idle L2 under KVM inside L1).

The functional test asks the running lab once, as JSON; asking it again for text costs
another inner ``kvmlab ps`` in an L1 whose only vCPU the storm keeps busy (~50 s here)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from kvmlab.cli.ps_cmd import _print_threads

RECORDED = Path(__file__).parent / "data" / "ps-threads-timer-storm.json"


def printed(rows: list[dict[str, object]]) -> str:
    out = io.StringIO()
    _print_threads(Console(file=out, width=200), rows)
    return out.getvalue()


def test_each_qemu_is_a_table_titled_with_where_it_was_measured() -> None:
    rows = json.loads(RECORDED.read_text())
    text = printed(rows)
    assert "timer-storm/l1: QEMU threads, measured this host" in text
    assert "timer-storm/l1/idle: QEMU threads, measured inside timer-storm/l1" in text
    for row in rows:
        for thread in row["threads"]:
            assert str(thread["tid"]) in text and str(thread["name"]) in text


def test_a_guest_whose_threads_were_not_measured_says_why_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = json.loads(RECORDED.read_text())
    rows[1] |= {"threads": [], "threads_problem": "the kvmlab there does not list it"}
    text = printed(rows)
    assert "timer-storm/l1/idle" not in text
    err = capsys.readouterr().err
    assert "timer-storm/l1/idle: threads not measured: the kvmlab there does not list it" in err
