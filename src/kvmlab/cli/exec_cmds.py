"""``kvmlab exec`` and ``kvmlab console``: reaching into a running guest.

``exec`` behaves like ``ssh HOST CMD`` as far as the guest agent allows: stdin is forwarded
unless it is a terminal (the agent takes it whole, before the command starts), the exit
code passes through, and Ctrl-C, SIGTERM or SIGHUP kill the guest command. Output comes
back when the command has ended; past the agent's 16 MiB per stream it is an error.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import sys
import threading
from typing import BinaryIO

from kvmlab.cli.lab_cmds import find_guest, interruptible
from kvmlab.errors import Interrupted, UsageError
from kvmlab.guest.agent import MAX_INPUT
from kvmlab.guest.errors import GuestExecInterrupted, GuestInputTooLarge
from kvmlab.runtime import backends

STDIN_HINT_AFTER = 10.0  # seconds without EOF on stdin before saying what kvmlab waits for


def check_timeout(timeout: float) -> float:
    """``--timeout`` as given if it is a positive number of seconds (inf: no limit)."""
    if not timeout > 0:  # also NaN
        raise UsageError(f"--timeout must be a positive number of seconds, not {timeout:g}")
    return timeout


def run_exec(address: str, command: list[str], timeout: float) -> int:
    """Run a command in a guest, pass its output through, return its exit code."""

    if not command:
        raise UsageError("give the command to run after --, e.g. kvmlab exec basic/vm1 -- uname -r")
    check_timeout(timeout)
    run_dir, record = find_guest(address)
    try:
        with interruptible(f"running {shlex.join(command)} in {address}"):
            data = read_input()
            try:
                machine = backends.attach(run_dir, record)
                result = machine.exec(command, timeout=timeout, input=data)
            except GuestExecInterrupted as exc:
                raise Interrupted(f"interrupted: {exc}") from None
    except Interrupted:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # on the way out: more of them change nothing
        raise
    code = result.returncode if result.returncode >= 0 else 128 - result.returncode
    if not _write(sys.stdout.buffer, result.stdout):
        code = 141  # like a command killed by SIGPIPE: the reader left (e.g. | head)
    _write(sys.stderr.buffer, result.stderr)
    result.complete(command)
    return code


def read_input(fd: int = 0, limit: int = MAX_INPUT) -> bytes | None:
    """What the guest command gets on stdin, read to EOF (a pipe, a file; ``limit`` bytes).

    None (the command gets /dev/null) if ``fd`` is a terminal, closed or empty.
    """
    if os.isatty(fd):
        return None
    try:
        os.fstat(fd)
    except OSError:
        return None  # closed
    hint = _stdin_hint()
    try:
        chunks, size = _read_to_end(fd, limit)
    finally:
        hint.cancel()
    if size > limit:
        raise GuestInputTooLarge(size, limit)
    return b"".join(chunks) or None


def _stdin_hint() -> threading.Timer:
    """A line on stderr if stdin has not ended after a while, started."""
    hint = threading.Timer(
        STDIN_HINT_AFTER,
        print,
        [
            "kvmlab: waiting for the end of stdin, which goes to the guest command "
            "(give it </dev/null if it needs none)"
        ],
        {"file": sys.stderr, "flush": True},
    )
    hint.daemon = True
    hint.start()
    return hint


def _read_to_end(fd: int, limit: int) -> tuple[list[bytes], int]:
    """What ``fd`` holds up to its end, or a byte past ``limit``; and how many bytes."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        try:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        except BlockingIOError:  # a non-blocking pipe inherited from the caller
            select.select([fd], [], [])
            continue
        except OSError as exc:
            raise UsageError(f"cannot read stdin: {exc.strerror}") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return chunks, size


def _write(stream: BinaryIO, data: bytes) -> bool:
    """Write ``data`` to a standard stream; False if its reader has gone (EPIPE)."""
    try:
        stream.write(data)
        stream.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())  # no second EPIPE when Python flushes at exit
        os.close(devnull)
        return False
    return True


def run_console(address: str) -> None:
    """Attach the terminal to a guest's serial console (Ctrl-] detaches)."""
    from kvmlab.cli.console import attach_socket

    run_dir, record = find_guest(address)
    if record.via is not None:
        outer = f"{record.lab}/{record.via}"
        raise UsageError(
            f"{address} runs inside {outer}: its console is there "
            f"('kvmlab exec {outer} -- kvmlab console ...')"
        )
    with interruptible(f"attached to the console of {address}"):
        # QEMU's socket, or libvirt's console stream (its connection closes as kvmlab exits)
        attach_socket(backends.attach(run_dir, record).console_socket())
