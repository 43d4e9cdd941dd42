"""A ``dpdk-testpmd`` kvmlab runs (switch, traffic generator, sink), driven at its prompt.

testpmd runs interactively (``-i``). Its stdin is a FIFO in its directory, which testpmd
itself holds open for writing too, so it never reads end-of-file (which would make it
quit) and any later kvmlab command can type at it: a lab's switch outlives ``kvmlab up``.
Its stdout and stderr go to its log; a command's answer is what the log gains up to the
next ``testpmd>`` prompt. Stopping is ``quit`` (testpmd closes its ports and removes its
sockets), then SIGTERM, then SIGKILL, each with a timeout.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kvmlab.errors import ProcessFailure, RuntimeFailure, StateError
from kvmlab.proc.processes import alive, die_with_parent, start_time, tail, terminate, wait_gone
from kvmlab.proc.signals import deferred_signals, unblock_in_child

PROMPT = b"testpmd> "
LINE_BUFFERED = ("stdbuf", "-oL", "-eL")
"""testpmd prints with stdio, fully buffered into a file: a command's answer would reach the
log only after the prompt that follows it (which testpmd writes directly)."""


class TestPmd:
    """One testpmd process: started (or attached to), typed at, stopped."""

    __test__ = False  # not a pytest class

    def __init__(self, name: str, argv: list[str], directory: Path) -> None:
        self.name = name
        self.argv = argv
        self.dir = directory
        self.pid = 0
        self.started: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def fifo(self) -> Path:
        """Where commands are written."""
        return self.dir / f"{self.name}.in"

    @property
    def log(self) -> Path:
        """Everything it printed."""
        return self.dir / f"{self.name}.log"

    @classmethod
    def attach(cls, name: str, directory: Path, pid: int, started: int | None) -> TestPmd:
        """A testpmd another kvmlab started (its FIFO and log in ``directory``)."""
        tp = cls(name, [], directory)
        tp.pid, tp.started = pid, started
        return tp

    def start(
        self, patience: float, outlive: bool = False, on_spawn: Callable[[], None] | None = None
    ) -> None:
        """Spawn it and wait for its first prompt (its ports are set up by then).

        ``outlive``: keep running when kvmlab exits (a lab's switch, stopped by ``kvmlab
        down``); otherwise it is killed with kvmlab. ``on_spawn`` runs as soon as the pid is
        known, with signals held (the caller puts it on record there).
        """
        if self.fifo.is_fifo() and self.fifo.lstat().st_uid == os.geteuid():
            self.fifo.unlink()  # an earlier testpmd's of the same name, in kvmlab's directory
        os.mkfifo(self.fifo, 0o600)
        fd_in = os.open(self.fifo, os.O_RDWR | os.O_NOFOLLOW)
        try:
            # a fresh log: a prompt left by an earlier testpmd must not answer for this one
            fd_out = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        except OSError:
            os.close(fd_in)
            raise
        try:
            with deferred_signals():  # spawned and on record, or not spawned
                try:
                    self._proc = subprocess.Popen(
                        [*LINE_BUFFERED, *self.argv],
                        stdin=fd_in,
                        stdout=fd_out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=unblock_in_child if outlive else die_with_parent,
                    )
                except OSError as exc:
                    raise RuntimeFailure(
                        f"{self.name}: cannot start {self.argv[0]}: {exc.strerror}"
                    ) from None
                self.pid = self._proc.pid
                self.started = start_time(self.pid)
                if on_spawn is not None:
                    on_spawn()
        finally:
            os.close(fd_in)
            os.close(fd_out)
        self._until(0, patience, "its prompt")

    def running(self) -> bool:
        """Whether it still runs (and is the process started)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return alive(self.pid, started=self.started)

    def _size(self) -> int:
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def _until(self, offset: int, timeout: float, doing: str) -> str:
        """The log after ``offset`` up to the next prompt (waiting for it), or an error."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.log.open("rb") as f:
                    f.seek(offset)
                    got = f.read()
            except OSError:
                got = b""
            at = got.find(PROMPT)
            if at >= 0:
                return got[:at].decode(errors="replace")
            if not self.running():
                raise self._failure(f"exited before {doing}")
            if time.monotonic() >= deadline:
                raise self._failure(f"waited {timeout:.0f} s in vain for {doing}")
            time.sleep(0.01)

    def _failure(self, what: str) -> ProcessFailure:
        code = self._proc.poll() if self._proc else None
        return ProcessFailure(
            f"{self.name} ({self.argv[0] if self.argv else 'testpmd'}) {what}",
            self.argv,
            code,
            tail(self.log, 15),
            self.log,
        )

    def command(self, line: str, timeout: float = 30.0) -> str:
        """Type ``line`` and return what testpmd printed before its next prompt."""
        if "\n" in line:
            raise ValueError("one command per call")
        if not self.running():
            raise self._failure(f"is not running for {line!r}")
        offset = self._size()
        try:
            self._write(line + "\n")
        except OSError as exc:  # ENXIO: nobody reads the FIFO any more, testpmd is gone
            raise self._failure(f"cannot take {line!r} ({exc.strerror})") from None
        return self._until(offset, timeout, f"its answer to {line!r}")

    def _write(self, text: str) -> None:
        st = os.lstat(self.fifo)
        if not stat.S_ISFIFO(st.st_mode) or st.st_uid != os.geteuid():
            raise StateError(f"{self.fifo} is not kvmlab's FIFO")
        fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def stop(self, grace: float = 10.0) -> None:
        """``quit``, then SIGTERM, then SIGKILL; waits until it is gone."""
        if self.pid and self.running():
            with contextlib.suppress(OSError):
                self._write("stop\nquit\n")
            if not wait_gone(self.pid, grace):
                terminate(self.pid, started=self.started, grace=3.0)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(10)
        if self.pid and alive(self.pid, started=self.started):
            raise RuntimeFailure(f"{self.name} (pid {self.pid}) did not stop")
