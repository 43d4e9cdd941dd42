"""Signals around the moments that must not be cut in half.

The CLI turns Ctrl-C, SIGTERM and SIGHUP into ``KeyboardInterrupt`` (:func:`interrupting`),
so clean-up in ``finally`` blocks runs. Some sections must not be interrupted part-way:
spawning a QEMU and putting its pid on record, disconnecting QMP, stopping guests while
cleaning up. :func:`deferred_signals` holds the signals back for such a section (at the
OS level, and in the handler for one that already arrived) and raises the interrupt when
the section ends.

Only the first interrupt is raised: the clean-up it starts is not cut short by the next
Ctrl-C (a user pressing it again, impatient, before the first handler could hold them off
would otherwise leave a guest command or a QEMU running). The later ones are noted, and
raised by a :func:`deferred_signals` section that ends while no interrupt is on its way.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_state = {"depth": 0, "pending": 0, "armed": 0, "raised": 0}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state["depth"] or _state["raised"]:
        _state["pending"] = signum
        return
    _state["raised"] = signum
    raise KeyboardInterrupt


@contextmanager
def interrupting(then_ignore: bool = False) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP raise ``KeyboardInterrupt`` (deferred where held back).

    ``then_ignore``: afterwards they are ignored instead of handled as before (the CLI's
    last moments: printing the final message and exiting must not be cut by one more).
    """
    previous = {sig: signal.signal(sig, _on_signal) for sig in HANDLED}
    if not _state["armed"]:
        _state["raised"] = _state["pending"] = 0
    _state["armed"] += 1
    try:
        yield
    finally:
        _state["armed"] -= 1
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if then_ignore else handler)
        if not _state["armed"]:
            _state["raised"] = 0


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for the ``with`` block; raise the interrupt after.

    In threads other than the main one (where signals are never handled) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        if _state["depth"] == 0 and _state["pending"] and not _state["raised"]:
            _state["pending"] = 0
            _state["raised"] = 1
            raise KeyboardInterrupt  # the user's interrupt wins over an error on its way out


def unblock_in_child() -> None:  # pragma: no cover - runs in the child before exec
    """For ``preexec_fn``: a child spawned inside :func:`deferred_signals` would inherit the
    held signals blocked (the mask survives fork and exec), so SIGTERM would never reach it
    and every stop would end in SIGKILL."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
