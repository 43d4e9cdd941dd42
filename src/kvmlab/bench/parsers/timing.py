"""Wall-clock and CPU time of a timed command (e.g. a kernel build).

Accepted formats, read from the end of the output so that whatever the command
itself printed before (compiler warnings, make's output) is ignored:

* GNU or busybox ``/usr/bin/time -f '%e %U %S' CMD``: the last line is
  ``ELAPSED USER SYS`` in seconds. GNU time's "Command exited with non-zero
  status N" / "Command terminated by signal N" just before it raise ParseError.
* POSIX ``time -p CMD``: ``real 0.23`` / ``user 0.23`` / ``sys 0.00``.
* bash's ``time`` keyword (``real\\t0m0.226s``) and busybox ``time`` without
  ``-f`` (``real\\t0m 0.27s``).

The last two cannot tell a failed command: check its exit status separately.
"""

from __future__ import annotations

import re

from kvmlab.bench.parsers._common import NUMBER, Source
from kvmlab.bench.parsers.metric import Metric

_TRIPLE = re.compile(rf"^\s*({NUMBER})\s+({NUMBER})\s+({NUMBER})\s*$")
_LABELLED = re.compile(rf"^(real|user|sys)\s+(?:(\d+)m\s*)?({NUMBER})s?\s*$")
_FAILED = re.compile(r"^Command (exited with non-zero status \d+|terminated by signal \d+)$")
_NAMES = {"real": "elapsed_s", "user": "user_s", "sys": "sys_s"}


def parse_time_seconds(text: str) -> list[Metric]:
    """``elapsed_s``, ``user_s`` and ``sys_s`` (seconds, lower is better)."""
    src = Source("time", text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise src.error("empty output")
    triple = _TRIPLE.match(lines[-1])
    if triple:
        if len(lines) > 1 and (failed := _FAILED.match(lines[-2])):
            raise src.error(f"the timed command failed: {failed.group(0)}")
        values = dict(zip(_NAMES.values(), map(float, triple.groups()), strict=True))
    else:
        values = _labelled(src, lines[-3:])
    return [Metric(name, value, "s", False) for name, value in values.items()]


def _labelled(src: Source, tail: list[str]) -> dict[str, float]:
    """``real``/``user``/``sys`` lines, in that order, as seconds by metric name."""
    values: dict[str, float] = {}
    for line, label in zip(tail, _NAMES, strict=False):
        match = _LABELLED.match(line)
        if match is None or match.group(1) != label:
            break
        minutes = int(match.group(2) or 0)
        values[_NAMES[label]] = 60 * minutes + float(match.group(3))
    if len(values) != len(_NAMES):
        raise src.error("expected '%e %U %S' or real/user/sys lines at the end of the output")
    return values
