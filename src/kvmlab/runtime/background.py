"""A lab's background commands in a guest: started through its agent, each to its own log,
and seen to keep running (kvmlab's own programs until they say they run)."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kvmlab.errors import RuntimeFailure
from kvmlab.guest.errors import GuestExecTimeout
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.waits import LIMITS

BACKGROUND_GRACE_S = 1.0
"""How long a background command must keep running after its start to count as started
(an early exit, a missing program or device, is caught; a later one only by its log)."""


def background_argv(command: str) -> list[str]:
    """``command``'s words; kvmlab's own guest programs (``kvmlab-rtc``) by their path
    beside kvmlab, which a guest sharing the host root sees at the same place."""
    words = shlex.split(command)
    if "/" not in words[0] and words[0].startswith("kvmlab-"):
        beside = Path(sys.executable).with_name(words[0])
        if beside.is_file():
            words[0] = str(beside)
    return words


def announces_ready(command: str) -> bool:
    """Whether ``command`` is one of kvmlab's own guest programs (found beside kvmlab, not
    a program of the user's of a like name), which print their first line only once they
    run as asked (``kvmlab-rtc``: the ticks are on) or have failed."""
    return background_argv(command)[0] != shlex.split(command)[0]


def start_background(machine: Machine, commands: Sequence[str]) -> list[int]:
    """Start a lab's background ``commands`` in the guest, each one's output to
    ``/run/kvmlab-background-N.log`` there; their guest pids. kvmlab's own programs are
    waited for until they say they run (a profile taken after ``up`` must see their
    steady state, and a Python program starting over a nested 9p share on a loaded host
    takes seconds); then every one must still run after :data:`BACKGROUND_GRACE_S`
    (scaled by the guest's slowness, once for them all). One that has exited is a
    RuntimeFailure with what it printed."""
    started = []
    for i, command in enumerate(commands):
        log = f"/run/kvmlab-background-{i}.log"
        argv = ["sh", "-c", 'exec "$@" >"$0" 2>&1', log, *background_argv(command)]
        started.append((command, log, machine.exec_background(argv)))
    for command, log, pid in started:
        if announces_ready(command):
            _await_first_line(machine, command, log, pid)
    # then the grace, for them all: a program that printed an error is exiting by then
    time.sleep(BACKGROUND_GRACE_S * max(1.0, machine.level_factor()))
    for command, log, pid in started:
        alive = machine.exec(["sh", "-c", 'kill -0 "$1" 2>/dev/null', "-", str(pid)], timeout=60)
        if alive.returncode != 0:
            said = machine.exec(["tail", "-n", "5", log], timeout=60).stdout
            text = said.decode(errors="replace").strip()
            raise RuntimeFailure(
                f"{machine.config.name}: background command {command!r} exited at once"
                + (f": {text}" if text else "")
            )
    return [pid for _, _, pid in started]


FIRST_LINE_WAIT = 'while [ ! -s "$0" ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; done'
"""Guest-side shell (``$0`` the log, ``$1`` the pid): returns once the log has a byte or
the process is gone."""


def _await_first_line(machine: Machine, command: str, log: str, pid: int) -> None:
    """Wait in the guest until background ``command`` (guest ``pid``) has written to
    ``log`` or exited, bounded by the ``setup`` limit at the guest's speed."""
    limit = LIMITS["setup"]
    timeout = limit.value("ceiling", machine.level_factor())
    try:
        machine.exec(["sh", "-c", FIRST_LINE_WAIT, log, str(pid)], timeout=timeout)
    except GuestExecTimeout as exc:
        what = f"{machine.config.name}: background command {command!r} saying it runs"
        raise limit.exceeded(what, timeout, str(exc)) from None
