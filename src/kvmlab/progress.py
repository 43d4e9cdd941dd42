"""What a long job says while it runs, and to whom: one :class:`Progress` handed down.

A job (a lab brought up, a benchmark run, a migration) says each *stage* it reaches
(:meth:`Progress.step`: ``starting nested/l1``) and passing *detail* within one
(:meth:`Progress.detail`: each repetition, each step of a migration inside a comparison).
The job does not know where that goes: the command line owns the one that prints (stage
lines on stderr, the detail on a live status line on a terminal), a test one that keeps
the lines, and :data:`QUIET` says nothing.
"""

from __future__ import annotations

from collections.abc import Callable


class Progress:
    """Where a job's stages and details go. This base says nothing (:data:`QUIET`); a
    command's own prints, :class:`Relay` hands each to a function."""

    def step(self, text: str) -> None:
        """A stage reached: worth a line of its own where a person follows the job."""

    def detail(self, text: str) -> None:
        """Passing detail within a stage: shown while it is current, or not at all."""

    def as_detail(self) -> Progress:
        """This progress for a job run inside a larger one: its stages are told as detail."""
        return _AsDetail(self)

    def prefixed(self, prefix: str) -> Progress:
        """This progress with ``prefix`` before each stage and detail (``tuned: ``)."""
        return _Prefixed(self, prefix)


QUIET = Progress()
"""Progress nobody reads."""


class Relay(Progress):
    """Each stage to ``step``, each detail to ``detail`` (dropped when None)."""

    def __init__(
        self, step: Callable[[str], None], detail: Callable[[str], None] | None = None
    ) -> None:
        self._step = step
        self._detail = detail

    def step(self, text: str) -> None:
        self._step(text)

    def detail(self, text: str) -> None:
        if self._detail is not None:
            self._detail(text)


class _AsDetail(Progress):
    def __init__(self, outer: Progress) -> None:
        self.outer = outer

    def step(self, text: str) -> None:
        self.outer.detail(text)

    def detail(self, text: str) -> None:
        self.outer.detail(text)


class _Prefixed(Progress):
    def __init__(self, outer: Progress, prefix: str) -> None:
        self.outer = outer
        self.prefix = prefix

    def step(self, text: str) -> None:
        self.outer.step(self.prefix + text)

    def detail(self, text: str) -> None:
        self.outer.detail(self.prefix + text)
