"""Errors of running guests."""

from __future__ import annotations

from kvmlab.errors import KvmlabError


class RuntimeFailure(KvmlabError):
    """A guest or its control channel misbehaved at run time."""

    exit_code = 3


class QmpFailure(RuntimeFailure):
    """A QMP connection or command failed."""


class StateError(KvmlabError):
    """An operation that does not fit the guest's or lab's state (e.g. exec on a stopped guest)."""

    exit_code = 2


class Interrupted(KvmlabError):
    """Ctrl-C (SIGINT) or SIGTERM arrived; everything started was cleaned up."""

    exit_code = 130
