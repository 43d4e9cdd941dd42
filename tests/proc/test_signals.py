"""Only the first Ctrl-C is raised: the clean-up it starts is not cut by the next ones (real
signals sent to this process)."""

from __future__ import annotations

import os
import signal

import pytest

from kvmlab.proc.signals import deferred_signals, interrupting


def _interrupt() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    signal.sigtimedwait([], 0)  # a syscall: the handler has run when it returns


def test_a_second_interrupt_during_the_clean_up_is_not_raised() -> None:
    cleaned = []
    with pytest.raises(KeyboardInterrupt), interrupting():
        try:
            _interrupt()
            pytest.fail("the first interrupt is raised")
        finally:
            _interrupt()  # impatient: again, while cleaning up
            _interrupt()
            cleaned.append("all of it")
    assert cleaned == ["all of it"]


def test_a_deferred_section_ending_in_the_clean_up_raises_nothing_more() -> None:
    with pytest.raises(KeyboardInterrupt) as raised, interrupting():
        try:
            _interrupt()
        finally:
            with deferred_signals():
                _interrupt()
    assert raised.value.__context__ is None


def test_interrupts_are_raised_again_in_the_next_command() -> None:
    with pytest.raises(KeyboardInterrupt), interrupting():
        _interrupt()
    with pytest.raises(KeyboardInterrupt), interrupting():
        _interrupt()


def test_an_interrupt_held_by_a_deferred_section_is_raised_at_its_end() -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt), interrupting(), deferred_signals():
        _interrupt()
        reached.append("the end of the section")
    assert reached == ["the end of the section"]
