"""``kvmlab ps``'s rows (kvmlab.runtime.running_guests): none without a run root, and a
guest whose QEMU is gone listed with its state, nothing sampled."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvmlab.runtime import running_guests as ps


def test_no_run_root_no_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "none"))
    assert ps.running_guests() == []
    assert ps.running_guests(threads=True) == []


def test_a_dead_guest_is_listed_with_its_record_and_no_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = SimpleNamespace(
        pid=4242,
        accel="tcg",
        vcpus=2,
        memory=1 << 30,
        started=100.0,
        via=None,
        boot={"total": 3.0},
    )
    entry = SimpleNamespace(
        lab="basic",
        address=("vm1",),
        name="basic/vm1",
        record=record,
        problem=None,
        run_dir=Path("/run/basic/vm1"),
        state=lambda: "dead",
        processes=lambda: [],
    )
    lab_dir = SimpleNamespace(entries=lambda: [entry])
    monkeypatch.setattr(ps, "running_labs", lambda: [lab_dir])
    monkeypatch.setattr(ps, "time", SimpleNamespace(time=lambda: 160.04))
    rows: list[dict[str, Any]] = ps.running_guests()
    assert rows == [
        {
            "lab": "basic",
            "guest": "vm1",
            "address": "basic/vm1",
            "level": "L1",
            "state": "dead",
            "pid": 4242,
            "problem": None,
            "accel": "tcg",
            "vcpus": 2,
            "memory_bytes": 1 << 30,
            "uptime_s": 60.0,
            "host_cpu_pct": None,
            "guest_cpu_pct": None,
            "via": None,
            "boot_s": {"total": 3.0},
        }
    ]
