"""Host tool runner: failures carry argv and output, overruns are killed with their children."""

from __future__ import annotations

import time

import pytest

from kvmlab.errors import ProcessFailure, ToolMissing
from kvmlab.guest._run import run


def test_output_and_failure() -> None:
    assert run(["sh", "-c", "echo out"], what="echo", timeout=10, install="-") == "out\n"
    with pytest.raises(ProcessFailure) as info:
        run(["sh", "-c", "echo bad >&2; exit 4"], what="failing", timeout=10, install="-")
    assert (info.value.returncode, info.value.log_tail, info.value.argv[0]) == (4, ["bad"], "sh")


def test_timeout_kills_the_whole_group() -> None:
    start = time.monotonic()
    with pytest.raises(ProcessFailure, match="timed out") as info:
        run(["sh", "-c", "sleep 30 & sleep 30"], what="sleepy", timeout=0.3, install="-")
    assert time.monotonic() - start < 5 and info.value.returncode is None


def test_missing_tool() -> None:
    with pytest.raises(ToolMissing, match="apt-get install nothing"):
        run(["kvmlab-no-such-tool"], what="x", timeout=1, install="apt-get install nothing")
