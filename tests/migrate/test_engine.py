"""The migration engine's decisions against a scripted transport: what it cancels, lets
finish, hands over, backs out or abandons, whatever ends the job (no guest: the guest-side
checks are replaced by a recorder; the real transports are tested on real guests in
test_migrate_functional.py and test_migrate_libvirt.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kvmlab.errors import RuntimeFailure
from kvmlab.migrate import engine, guestside, job
from kvmlab.migrate.modes import Settings
from kvmlab.migrate.probe import Where
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.transports.base import JobState, Route, Transport
from kvmlab.migrate.workload import Baseline
from kvmlab.progress import QUIET, Progress, Relay
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord

FINISHED = ("completed", "failed", "cancelled")


def reply(status: str, passes: int = 1) -> dict[str, Any]:
    """A ``query-migrate`` reply (a completed one with its times)."""
    times = {"total-time": 2000, "downtime": 40} if status == "completed" else {}
    return {"status": status, "ram": {"dirty-sync-count": passes, "remaining": 0}, **times}


class Scripted(Transport[Machine]):
    """A transport whose job answers from a script; ``interrupt_at`` raises Ctrl-C in the
    wait after that many samples."""

    def setup(self) -> None:
        pass

    def __init__(self, script: list[dict[str, Any]], settings: Settings, **kw: Any) -> None:
        super().__init__(
            object(),  # type: ignore[arg-type]
            Path("/nonexistent"),
            GuestRecord.__new__(GuestRecord),
            settings,
            Route(),
        )
        self.script = script
        self.calls: list[str] = []
        self.samples = 0
        self.interrupt_at: int | None = kw.get("interrupt_at")
        self.fail_open = kw.get("fail_open", False)
        self.postcopy = kw.get("postcopy", False)
        self.alive = True

    @classmethod
    def check_route(cls, route: Route, record: GuestRecord) -> None:
        pass

    def prepare(self, progress: Progress) -> None:
        self.calls.append("prepare")

    def describe(self) -> str:
        return "scripted"

    @property
    def source_name(self) -> str:
        return "source"

    @property
    def dest_name(self) -> str:
        return "dest"

    @property
    def can_postcopy(self) -> bool:
        return bool(self.postcopy)

    def heartbeat_files(self) -> list[Where]:
        return []

    def open(self, progress: Progress) -> None:
        self.calls.append("open")
        if self.fail_open:
            raise RuntimeFailure("the destination QEMU did not start: no such binary")

    def start(self, progress: Progress) -> None:
        self.calls.append("start")

    def _now(self) -> dict[str, Any]:
        return self.script[min(self.samples, len(self.script) - 1)]

    def sample(self) -> tuple[dict[str, Any] | None, dict[str, float] | None]:
        self.samples += 1
        return self._now(), None

    def ended(self) -> JobState | None:
        status = self._now()["status"]
        return JobState(status) if status in FINISHED else None

    def wait(self, seconds: float) -> list[dict[str, Any]]:
        if self.interrupt_at is not None and self.samples == self.interrupt_at:
            self.interrupt_at = None
            raise KeyboardInterrupt
        return []

    def start_postcopy(self) -> None:
        self.calls.append("postcopy")

    def cancel(self) -> None:
        self.calls.append("cancel")

    def destination_alive(self) -> bool | None:
        return self.alive

    def destination_running(self) -> float:
        return 0.0

    def hand_over(self) -> Machine:
        self.calls.append("hand_over")
        return Fake("destination")  # type: ignore[return-value]

    def back_out(self, outcome: Outcome, progress: Progress) -> Machine:
        self.calls.append("back_out")
        return Fake("source")  # type: ignore[return-value]

    def destination_evidence(self) -> str:
        return "serial: panic"

    def abandon(self) -> None:
        self.calls.append("abandon")

    def discard(self) -> None:
        self.calls.append("discard")


class Fake:
    def __init__(self, side: str) -> None:
        self.side = side

    def disconnect(self) -> None:
        pass


@pytest.fixture(autouse=True)
def no_guest(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    verified: list[str] = []

    def verify(machine: Fake, *_: Any) -> list[guestside.Check]:
        verified.append(machine.side)
        return [guestside.Check("memory pattern", True, "")]

    monkeypatch.setattr(engine, "verify_after", verify)
    monkeypatch.setattr(guestside, "status", lambda _m: {"maxgap_us": 0})
    monkeypatch.setattr(guestside, "stop_dirtier", lambda *_: None)
    yield verified


def attempt(transport: Scripted) -> Outcome:
    outcome = Outcome("lab/vm", "scripted")
    ref = Baseline(guestside.Dirtier(pid=1, mem_mib=8, rate_mibs=0.0), "digest", 0)
    engine._attempt(transport, outcome, ref, QUIET)
    return outcome


def test_a_destination_that_does_not_start_is_backed_out_at_once(no_guest: list[str]) -> None:
    t = Scripted([reply("none")], Settings(), fail_open=True)
    outcome = attempt(t)
    assert t.calls == ["open", "back_out"]  # nothing to cancel, nothing followed
    assert outcome.error == "the destination QEMU did not start: no such binary"
    assert no_guest == ["source"]


def test_ctrl_c_in_precopy_cancels_and_checks_the_source(no_guest: list[str]) -> None:
    script = [reply("active"), reply("active"), reply("cancelled")]
    t = Scripted(script, Settings(), interrupt_at=1)
    outcome = attempt(t)
    assert t.calls == ["open", "start", "cancel", "back_out"]
    assert outcome.interrupted and outcome.status == "cancelled"
    assert no_guest == ["source"]


def test_ctrl_c_in_postcopy_lets_it_finish_however_long(
    no_guest: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the point of no return the job is followed to its end (not for CANCEL_S) and
    the guest handed over: cancelling would split the guest between two QEMUs."""
    monkeypatch.setattr(job, "CANCEL_S", 0.0)
    script = [reply("active", 1), reply("active", 2)] + [reply("postcopy-active", 3)] * 20
    script.append(reply("completed", 3))
    t = Scripted(script, Settings(mode="postcopy"), postcopy=True, interrupt_at=4)
    outcome = attempt(t)
    assert t.calls == ["open", "start", "postcopy", "hand_over"]
    assert outcome.interrupted and outcome.status == "completed"
    assert no_guest == ["destination"]


def test_postcopy_paused_is_a_lost_guest_abandoned_not_backed_out(no_guest: list[str]) -> None:
    script = [reply("active", 1), reply("active", 2), reply("postcopy-paused", 3)]
    t = Scripted(script, Settings(mode="postcopy"), postcopy=True)
    outcome = attempt(t)
    assert t.calls == ["open", "start", "postcopy", "abandon"]
    assert outcome.lost and outcome.status == "failed"
    assert outcome.checks_after[0].evidence == "serial: panic" and no_guest == []


def test_timeout_cancels_unless_postcopy_is_asked(no_guest: list[str]) -> None:
    script = [reply("active", 1)] * 3 + [reply("cancelled", 1)]
    t = Scripted(script, Settings(max_seconds=0.0))
    outcome = attempt(t)
    assert t.calls == ["open", "start", "cancel", "back_out"]
    assert outcome.cancelled == "not converged in 0 s" and not outcome.interrupted
    late = Scripted(
        [reply("active", 1)] * 3 + [reply("completed", 1)],
        Settings(max_seconds=0.0, on_timeout="postcopy"),
        postcopy=True,
    )
    done = attempt(late)
    assert late.calls == ["open", "start", "postcopy", "hand_over"]
    assert done.choice and "--on-timeout postcopy" in done.choice


def test_auto_without_evidence_says_so_before_its_in_flight_rule(no_guest: list[str]) -> None:
    script = [reply("active", 1), reply("active", 2), reply("active", 3), reply("completed", 3)]
    t = Scripted(script, Settings(mode="auto"), postcopy=True)
    outcome = Outcome("lab/vm", "scripted", choice="no verified migration of this guest here")
    ref = Baseline(guestside.Dirtier(pid=1, mem_mib=8, rate_mibs=0.0), "digest", 0)
    engine._attempt(t, outcome, ref, QUIET)
    assert t.calls == ["open", "start", "postcopy", "hand_over"]
    assert outcome.choice is not None
    assert outcome.choice.startswith("no verified migration of this guest here; by QEMU's figures:")
    assert outcome.choice.endswith(": postcopy")


def test_a_chosen_strategy_keeps_its_reason_when_the_timeout_switches(
    no_guest: list[str],
) -> None:
    script = [reply("active", 1)] * 3 + [reply("completed", 1)]
    t = Scripted(script, Settings(max_seconds=0.0, on_timeout="postcopy"), postcopy=True)
    outcome = Outcome("lab/vm", "auto: scripted", choice="xbzrle by the guest's gap")
    ref = Baseline(guestside.Dirtier(pid=1, mem_mib=8, rate_mibs=0.0), "digest", 0)
    engine._attempt(t, outcome, ref, QUIET)
    assert outcome.choice is not None
    assert outcome.choice.startswith("xbzrle by the guest's gap; then not converged in 0 s")


class Stuck(Scripted):
    """A job that a cancel does not end until ``unstick`` frees it (or ever)."""

    def __init__(self, frees: bool) -> None:
        super().__init__([reply("active")], Settings(max_seconds=0.0))
        self.frees = frees

    def unstick(self) -> str | None:
        self.calls.append("unstick")
        if self.frees:
            self.script = [reply("cancelled")]
            self.samples = 0
            return "closed the source QEMU's connection(s) to 10.0.0.2:49153 (ss -K)"
        return None


@pytest.mark.parametrize("frees", [True, False])
def test_a_job_a_cancel_does_not_end_is_freed_or_given_up_on(
    no_guest: list[str], monkeypatch: pytest.MonkeyPatch, frees: bool
) -> None:
    monkeypatch.setattr(job, "CANCEL_S", 0.05)
    t = Stuck(frees)
    said: list[str] = []
    outcome = Outcome("lab/vm", "stuck")
    ref = Baseline(guestside.Dirtier(pid=1, mem_mib=8, rate_mibs=0.0), "digest", 0)
    engine._attempt(t, outcome, ref, Relay(said.append))
    assert t.calls.count("cancel") == 1 and t.calls.count("unstick") == 1, t.calls
    assert any("has not ended" in line for line in said), said
    if frees:
        assert outcome.status == "cancelled" and "ss -K" in " ".join(said)
    else:
        assert "did not end" in (outcome.error or ""), outcome.error
    assert no_guest == ["source"], "the source is checked either way"
