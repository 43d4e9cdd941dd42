"""Progress of ``kvmlab bench``/``run`` on stderr: a line per stage anywhere, a live status
line besides on a terminal."""

from __future__ import annotations

import io
import re

from rich.console import Console

from kvmlab.cli.progress import StageLog

STAGE = "L1 nested/l1 booted (tcg, 7.3 s to its agent)"


def test_in_a_pipe_each_stage_is_one_line_with_the_time_since_the_start() -> None:
    out = io.StringIO()
    log = StageLog(Console(file=out, force_terminal=False, width=40, soft_wrap=True))
    log.start -= 42.4
    with log.live():
        log.detail("L1 nested/l1: cpu 1thread (2/3)")  # passing detail: not in a log
        log.step(STAGE)
        log.step("L1 nested/l1 cpu done (21.4 s; 1thread_events_per_s 455 events/s)")
    assert out.getvalue().splitlines() == [
        f"[  42 s] {STAGE}",
        "[  42 s] L1 nested/l1 cpu done (21.4 s; 1thread_events_per_s 455 events/s)",
    ], "whole lines, never wrapped, no escape codes"


def test_on_a_terminal_the_status_is_live_and_the_stages_stay() -> None:
    out = io.StringIO()
    log = StageLog(Console(file=out, force_terminal=True, width=100, soft_wrap=True))
    with log.live():
        log.detail("L1 nested/l1: cpu 1thread (2/3)")
        log.step(STAGE)
        assert log._status is not None
    assert log._status is None
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert f"[   0 s] {STAGE}" in plain
