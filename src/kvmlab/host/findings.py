"""What a host check reports: a status, a one-line summary, the evidence read, the fix."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Status(enum.StrEnum):
    """How a check came out, from the point of view of someone running VMs on this host."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    INFO = "info"
    SKIP = "skip"


@dataclass(frozen=True)
class Evidence:
    """One thing a check read: a host path (``/sys/...``) or a command line, and its value."""

    source: str
    value: str


@dataclass(frozen=True)
class Finding:
    """The result of one check.

    ``id`` is stable (``kvm.nested``, ``tools.qemu``); ``fix`` holds exact commands or
    config lines, in the order to apply them (empty when there is nothing to do).
    """

    id: str
    status: Status
    summary: str
    evidence: tuple[Evidence, ...] = ()
    fix: tuple[str, ...] = ()


def finding(
    id: str,
    status: Status,
    summary: str,
    evidence: Iterable[tuple[str, str]] = (),
    fix: Iterable[str] = (),
) -> Finding:
    """Build a :class:`Finding` from plain ``(source, value)`` pairs."""
    return Finding(
        id=id,
        status=status,
        summary=summary,
        evidence=tuple(Evidence(s, v) for s, v in evidence),
        fix=tuple(fix),
    )
