"""The progress the command line prints: the one :class:`~kvmlab.progress.Progress` that
says anything, on stderr, each command in its own form."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kvmlab.progress import Progress, Relay

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status


class LiveStatus(Progress):
    """Each stage a line (``say`` prints it, in the command's form), and while
    :meth:`live` runs on a terminal a status line below them showing the current stage or
    detail (without a terminal the detail is not shown)."""

    def __init__(self, console: Console, say: Callable[[str], None]) -> None:
        self.console = console
        self.say = say
        self._status: Status | None = None

    def step(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)
        self.say(text)

    def detail(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    @contextmanager
    def live(self) -> Iterator[None]:
        """The live status while the block runs, on a terminal."""
        if not self.console.is_terminal:
            yield
            return
        with self.console.status("starting") as status:
            self._status = status
            try:
                yield
            finally:
                self._status = None


def indented(console: Console) -> LiveStatus:
    """``kvmlab up``'s: each stage an indented line (``  starting basic/vm1 ...``)."""
    return LiveStatus(console, lambda text: console.print(f"  {text}"))


class StageLog(LiveStatus):
    """``kvmlab bench``'s, which a person follows anywhere: each stage a line with the time
    since the start (``[  42 s] L1 nested/l1 booted (tcg, 7.3 s to its agent)``), and on a
    terminal the live status line showing each repetition."""

    def __init__(self, console: Console) -> None:
        super().__init__(console, self._line)
        self.start = time.monotonic()

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.start
        self.console.print(f"[{elapsed:4.0f} s] {text}", markup=False, highlight=False)


def lines(prefix: str, details: bool = False) -> Relay:
    """Each stage (``details``: and detail) a line on stderr after ``prefix``, at once."""

    def say(text: str) -> None:
        print(f"{prefix}{text}", file=sys.stderr, flush=True)

    return Relay(say, say if details else None)
