"""Waits end on a stall or a scaled ceiling, each named, with the variable that raises it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.runtime.waits import (
    LIMITS,
    Stalled,
    Watch,
    cpu_steps,
    level_factor,
    limits_markdown,
    timeouts_doc,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "timeouts.md"


def test_progress_keeps_a_wait_alive_past_the_stall_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVMLAB_STALL_BOOT", "0.2")
    counter = iter(range(1000))
    watch = Watch(LIMITS["boot"], "vm", {"serial output": lambda: next(counter)})
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        watch.poll()  # the probe changes on every poll: never a stall
        time.sleep(0.05)
    assert watch.seen.startswith("serial output at")


def test_no_progress_is_a_stall_naming_limit_and_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVMLAB_STALL_BOOT", "0.1")
    watch = Watch(LIMITS["boot"], "lab/vm: its guest agent did not answer", {"x": lambda: 1})
    time.sleep(0.15)
    with pytest.raises(Stalled) as caught:
        watch.poll()
    text = str(caught.value)
    assert text.startswith("lab/vm: its guest agent did not answer: no progress for 0.1 s")
    assert "limit 'boot'" in text and "last progress: nothing yet" in text
    assert "KVMLAB_STALL_BOOT=SECONDS" in text


def test_the_ceiling_scales_with_the_level_and_can_be_overridden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup = LIMITS["setup"]
    assert setup.value("ceiling", 3.0) == 3 * setup.ceiling
    assert setup.value("stall", 3.0) == setup.stall  # stalls do not scale: no progress is none
    monkeypatch.setenv("KVMLAB_CEILING_SETUP", "7")
    assert setup.value("ceiling", 3.0) == 7
    for bad in ("nan", "-1", "0", "inf", "soon"):
        monkeypatch.setenv("KVMLAB_CEILING_SETUP", bad)
        with pytest.raises(UsageError, match="KVMLAB_CEILING_SETUP"):
            setup.value("ceiling")


def test_ceiling_expires_even_with_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVMLAB_CEILING_INNER_UP", "0.1")
    counter = iter(range(1000))
    watch = Watch(LIMITS["inner-up"], "l1: starting its guests", {"cpu": lambda: next(counter)})
    time.sleep(0.15)
    with pytest.raises(Stalled, match=r"not done after 0.1 s .*KVMLAB_CEILING_INNER_UP"):
        watch.poll()


def test_level_factor_from_boot_stages() -> None:
    assert level_factor({}) == 1.0
    assert level_factor({"total": 2.0}) == 1.0  # faster than the reference: no shorter waits
    assert level_factor({"total": 50.0}) == 10.0


def test_idle_cpu_is_not_progress_busy_cpu_is() -> None:
    seconds = [0.0]
    probe = cpu_steps(lambda: seconds[0], step=5.0)
    first = probe()
    seconds[0] = 4.9  # an idle guest's trickle
    assert probe() == first
    seconds[0] = 5.1
    assert probe() != first
    assert cpu_steps(lambda: None)() is None


def test_timeouts_doc_lists_every_limit() -> None:
    assert "| `boot` |" in limits_markdown()
    assert DOC.read_text() == timeouts_doc(), "regenerate with 'make docs'"
