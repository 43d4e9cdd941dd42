"""``kvmlab bench`` as a job (kvmlab.bench.bench_job): a failure after the run was stored is
kept with the run for the report; one before it is raised."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kvmlab.bench import session
from kvmlab.bench.bench_job import BenchJob, run_recorded
from kvmlab.errors import HostError, KvmlabError
from kvmlab.results.store import ResultStore
from kvmlab.runtime.lab import Launch

JOB = cast(
    BenchJob,
    SimpleNamespace(loaded=None, settings=None, levels={"L0"}, planned=SimpleNamespace(lab=())),
)
STORE = cast(ResultStore, None)
LAUNCH = cast(Launch, None)


def fake_run(
    monkeypatch: pytest.MonkeyPatch,
    store_first: bool,
    error: BaseException | None,
    fault: KvmlabError | None = None,
) -> None:
    def run_bench(*args: Any, on_start: Callable[[int], None], **kwargs: Any) -> int:
        args[6]["L0"] = 1.5  # timings, as the run records them
        if fault is not None:
            kwargs["faults"].append(fault)
        if store_first:
            on_start(7)
        if error is not None:
            raise error
        return 7

    monkeypatch.setattr(session, "run_bench", run_bench)


def test_a_run_to_the_end_has_no_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    fault = HostError("pvp: the switch lost packets")
    fake_run(monkeypatch, store_first=True, error=None, fault=fault)
    timings: dict[str, float] = {}
    recorded = run_recorded(JOB, STORE, LAUNCH, {}, timings)
    assert (recorded.run_id, recorded.failure, recorded.faults) == (7, None, [fault])
    assert timings == {"L0": 1.5}


@pytest.mark.parametrize("error", [HostError("L1 vm1 failed while booting"), KeyboardInterrupt()])
def test_a_failure_after_the_run_was_stored_is_kept_with_it(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    fake_run(monkeypatch, store_first=True, error=error)
    recorded = run_recorded(JOB, STORE, LAUNCH, {}, {})
    assert recorded.run_id == 7
    assert recorded.failure is error


def test_a_failure_before_anything_was_stored_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_run(monkeypatch, store_first=False, error=HostError("no KVM"))
    with pytest.raises(HostError, match="no KVM"):
        run_recorded(JOB, STORE, LAUNCH, {}, {})
