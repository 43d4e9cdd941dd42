"""`kvmlab tune` on the real host: applied, verified, rolled back to exactly what was there
(IRQs the kernel manages itself are skipped, as tuned does)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import cli

pytestmark = pytest.mark.functional

KNOBS = ["proc/sys/kernel/nmi_watchdog", "proc/sys/kernel/numa_balancing",
         "proc/sys/vm/stat_interval", "sys/kernel/mm/transparent_hugepage/enabled",
         "sys/kernel/mm/ksm/run", "sys/devices/virtual/workqueue/cpumask",
         "proc/irq/default_smp_affinity"]  # fmt: skip


def host_state() -> dict[str, str]:
    paths = [Path("/", k) for k in KNOBS] + sorted(Path("/proc/irq").glob("*/smp_affinity_list"))
    return {str(p): p.read_text() for p in paths if p.exists()}


def test_apply_verify_rollback_on_this_host(tmp_path: Path) -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("isolating a CPU needs two")
    env = {**os.environ, "KVMLAB_TUNING_STATE": str(tmp_path / "tuning.json")}
    before = host_state()
    applied = cli(env, "tune", "apply", "--isolate", "1", "-o", "json")
    try:
        assert applied.returncode == 0, applied.stderr
        report = json.loads(applied.stdout)
        assert not report["failed"]
        assert any(b["missing"].startswith("isolcpus") for b in report["boot"])
        assert (tmp_path / "tuning.json").exists()
        verified = cli(env, "tune", "verify", "--isolate", "1")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        again = cli(env, "tune", "apply", "--isolate", "1")
        assert again.returncode == 3 and "applied already" in again.stderr
    finally:
        back = cli(env, "tune", "rollback")
    assert back.returncode == 0, back.stderr
    assert host_state() == before
    assert not (tmp_path / "tuning.json").exists()
    nothing = cli(env, "tune", "rollback")
    assert nothing.returncode == 0 and "nothing to roll back" in nothing.stderr
