"""A synchronous QMP session over qemu.qmp, for code that is not asyncio.

Every call runs on a private event loop with a timeout. Events are collected
from the moment of connection, so one that fires between two calls is not lost.
Ctrl-C, SIGTERM and SIGHUP are held back while the loop runs and raised when the call
returns (within its timeout): an interrupt inside a task would leave the client
half-connected and tasks pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from qemu.qmp import EventListener, QMPClient, QMPError

from kvmlab.errors import QmpFailure
from kvmlab.proc.signals import deferred_signals
from kvmlab.runtime.monitor import Monitor

T = TypeVar("T")


class QmpSession(Monitor):
    """One QMP connection to a QEMU monitor socket (the qemu backend's monitor)."""

    def __init__(self, socket: Path, name: str = "kvmlab") -> None:
        self.socket = socket
        # qemu.qmp logs failed attempts at ERROR; the caller gets them as exceptions instead.
        logging.getLogger("qemu.qmp").addHandler(logging.NullHandler())
        logging.getLogger("qemu.qmp").propagate = False
        with deferred_signals():  # a loop half-made by an interrupt complains when collected
            self._loop = asyncio.new_event_loop()
            self._client = QMPClient(name)
            self._events = EventListener()
            self._client.register_listener(self._events)

    def _run(self, what: str, coro: Awaitable[T], timeout: float) -> T:
        try:
            with deferred_signals():  # see the module doc
                return self._loop.run_until_complete(asyncio.wait_for(coro, timeout))
        except TimeoutError:
            raise QmpFailure(f"QMP {what} on {self.socket}: no answer in {timeout:g} s") from None
        except (QMPError, OSError, EOFError) as exc:
            raise QmpFailure(f"QMP {what} on {self.socket} failed: {exc}") from exc

    def connect(self, timeout: float = 10.0, give_up: Callable[[], bool] | None = None) -> Self:
        """Connect, retrying while the socket is not there yet or refuses.

        ``give_up`` is asked between attempts (e.g. "has QEMU exited?") to stop early.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._run("connect", self._client.connect(str(self.socket)), 5.0)
                return self
            except QmpFailure:
                self._reset()
                if time.monotonic() >= deadline or (give_up is not None and give_up()):
                    raise
                time.sleep(0.02)

    def execute(
        self, command: str, args: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        """Run a QMP command and return its ``return`` value."""
        return self._run(command, self._client.execute(command, args), timeout)

    def wait_event(self, names: Iterable[str], timeout: float) -> dict[str, Any] | None:
        """The first event named in ``names`` (including ones already received), or None."""
        wanted = set(names)

        async def first() -> dict[str, Any]:
            while True:
                event = await self._events.get()
                if event["event"] in wanted:
                    return dict(event)

        try:
            with deferred_signals():
                return self._loop.run_until_complete(asyncio.wait_for(first(), timeout))
        except TimeoutError:
            return None

    def _reset(self) -> None:
        """Return the client to idle after a failed attempt (its reader tasks end with it).

        Never cut short by a signal: a half-done disconnect leaves the client unusable.
        """
        with deferred_signals(), contextlib.suppress(QMPError, OSError, EOFError, TimeoutError):
            self._loop.run_until_complete(asyncio.wait_for(self._client.disconnect(), 5))

    def close(self) -> None:
        """Disconnect (quietly: QEMU may already be gone) and close the loop.

        Tasks the client leaves behind are cancelled and awaited first, so closing the loop
        never leaves asyncio complaining about pending tasks on stderr.
        """
        if self._loop.is_closed():
            return
        with deferred_signals():  # a Ctrl-C here would leave tasks pending for the GC
            self._close()

    def _close(self) -> None:
        try:
            with contextlib.suppress(Exception):  # the client may be mid-way through anything
                self._reset()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
