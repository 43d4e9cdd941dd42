"""Run a host tool with a timeout, killing its whole process group if it overruns."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

from kvmlab.errors import ProcessFailure, ToolMissing


def run(
    argv: Sequence[str],
    *,
    what: str,
    timeout: float,
    install: str,
    cwd: Path | None = None,
) -> str:
    """Run ``argv``, return its stdout; raise ProcessFailure on failure or timeout.

    The child gets its own session so that helpers it spawns (apt's download methods)
    are killed with it on timeout instead of being left behind.
    """
    argv = list(argv)
    if shutil.which(argv[0]) is None:
        raise ToolMissing(argv[0], install)
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate(timeout=10)
        raise ProcessFailure(
            f"{what}: timed out after {timeout:g}s", argv, None, _tail(err or out)
        ) from None
    except BaseException:
        _kill_group(proc.pid)
        proc.wait(timeout=10)
        raise
    if proc.returncode != 0:
        raise ProcessFailure(what, argv, proc.returncode, _tail(err or out))
    return out


def _tail(text: str, lines: int = 20) -> list[str]:
    return text.splitlines()[-lines:]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
