"""A synchronous QMP session over qemu.qmp, for code that is not asyncio.

Every call runs on a private event loop with a timeout. Events are collected
from the moment of connection, so one that fires between two calls is not lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from qemu.qmp import EventListener, QMPClient, QMPError

from kvmlab.runtime.errors import QmpFailure

T = TypeVar("T")


class QmpSession:
    """One QMP connection to a QEMU monitor socket."""

    def __init__(self, socket: Path, name: str = "kvmlab") -> None:
        self.socket = socket
        # qemu.qmp logs failed attempts at ERROR; the caller gets them as exceptions instead.
        logging.getLogger("qemu.qmp").addHandler(logging.NullHandler())
        logging.getLogger("qemu.qmp").propagate = False
        self._loop = asyncio.new_event_loop()
        self._client = QMPClient(name)
        self._events = EventListener()
        self._client.register_listener(self._events)
        self._connected = False

    def _run(self, what: str, coro: Awaitable[T], timeout: float) -> T:
        try:
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
                self._connected = True
                return self
            except QmpFailure:
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
            return self._loop.run_until_complete(asyncio.wait_for(first(), timeout))
        except TimeoutError:
            return None

    def close(self) -> None:
        """Disconnect (quietly: QEMU may already be gone) and close the loop."""
        if self._loop.is_closed():
            return
        try:
            if self._connected:
                self._loop.run_until_complete(asyncio.wait_for(self._client.disconnect(), 5))
        except (QMPError, OSError, EOFError, TimeoutError):
            pass
        finally:
            self._connected = False
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
