"""`kvmlab tune` on the real host: applied, verified, rolled back to exactly what was there.
The faults come from outside kvmlab: the kernel refusing to move an IRQ it manages, and
another process moving an IRQ back onto the isolated CPU."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cli

pytestmark = pytest.mark.functional

KNOBS = [
    "proc/sys/kernel/nmi_watchdog",
    "proc/sys/kernel/numa_balancing",
    "proc/sys/vm/stat_interval",
    "sys/kernel/mm/transparent_hugepage/enabled",
    "sys/kernel/mm/ksm/run",
    "sys/devices/virtual/workqueue/cpumask",
    "proc/irq/default_smp_affinity",
]


def host_state() -> dict[str, str]:
    paths = [Path("/", k) for k in KNOBS] + sorted(Path("/proc/irq").glob("*/smp_affinity_list"))
    return {str(p): p.read_text() for p in paths if p.exists()}


def irqs() -> dict[int, Path]:
    return {int(p.name): p for p in Path("/proc/irq").iterdir() if p.name.isdigit()}


def unmovable_irqs() -> dict[int, set[int]]:
    """IRQ -> the CPUs its interrupts land on, for each IRQ the kernel refuses to move
    (found by writing its own affinity back with the shell, as an administrator would)."""
    found = {}
    for irq, path in irqs().items():
        affinity = path / "smp_affinity_list"
        tried = subprocess.run(
            ["sh", "-c", f"cat {affinity} > {affinity}"], capture_output=True, text=True
        )
        if tried.returncode != 0:
            lands = (path / "effective_affinity_list").read_text().strip()
            found[irq] = {int(c) for c in lands.replace("-", ",").split(",") if c}
    return found


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("isolating a CPU needs two")
    return {**os.environ, "KVMLAB_TUNING_STATE": str(tmp_path / "tuning.json")}


def test_apply_verify_rollback_and_an_irq_moved_back_fails_verify(
    env: dict[str, str], tmp_path: Path
) -> None:
    landed = set().union(*unmovable_irqs().values())
    free = [c for c in range(os.cpu_count() or 1) if c not in landed]
    if not free:
        pytest.skip("an IRQ the kernel will not move lands on every CPU")
    cpu = str(free[-1])
    before = host_state()
    applied = cli(env, "tune", "apply", "--isolate", cpu, "-o", "json")
    try:
        assert applied.returncode == 0, applied.stdout + applied.stderr
        report = json.loads(applied.stdout)
        assert not report["failed"] and not report["undone"]
        assert any(b["missing"].startswith("isolcpus") for b in report["boot"])
        verified = cli(env, "tune", "verify", "--isolate", cpu)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        again = cli(env, "tune", "apply", "--isolate", cpu)
        assert again.returncode == 3 and "applied already" in again.stderr
        movable = next(i for i in sorted(irqs()) if i not in unmovable_irqs())
        subprocess.run(
            ["sh", "-c", f"echo {cpu} > /proc/irq/{movable}/smp_affinity_list"], check=True
        )
        moved = cli(env, "tune", "verify", "--isolate", cpu)
        assert moved.returncode == 1, moved.stdout
        assert f"FAILED   IRQ {movable} affinity:" in moved.stdout
        assert f"may run on CPUs {cpu} " in moved.stdout
    finally:
        back = cli(env, "tune", "rollback")
    assert back.returncode == 0, back.stderr
    assert host_state() == before
    assert not (tmp_path / "tuning.json").exists()
    nothing = cli(env, "tune", "rollback")
    assert nothing.returncode == 0 and "nothing to roll back" in nothing.stderr


def test_an_irq_the_kernel_will_not_move_off_the_isolated_cpu(
    env: dict[str, str], tmp_path: Path
) -> None:
    found = unmovable_irqs()
    if not found:
        pytest.skip("this host has no IRQ the kernel refuses to move")
    irq, lands = next(iter(sorted(found.items())))
    cpu = str(min(lands))
    if {int(cpu)} >= set(range(os.cpu_count() or 1)):
        pytest.skip("isolating the CPU it lands on leaves the host none")
    before = host_state()
    refused = cli(env, "tune", "apply", "--isolate", cpu)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert f"FAILED   IRQ {irq} affinity: IRQ {irq} (" in refused.stdout
    assert f"lands on isolated CPU {cpu} and the kernel will not move it" in refused.stdout
    assert f"isolcpus=managed_irq,domain,{cpu}" in refused.stdout
    assert "nothing changed" in refused.stdout
    assert host_state() == before and not (tmp_path / "tuning.json").exists()
    accepted = cli(env, "tune", "apply", "--isolate", cpu, "--unmovable-irqs", "accept")
    try:
        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        assert f"unmovable IRQ {irq} affinity:" in accepted.stdout
        strict = cli(env, "tune", "verify", "--isolate", cpu)
        assert strict.returncode == 1 and f"FAILED   IRQ {irq} affinity" in strict.stdout
        lenient = cli(env, "tune", "verify", "--isolate", cpu, "--unmovable-irqs", "accept")
        assert lenient.returncode == 0, lenient.stdout
    finally:
        back = cli(env, "tune", "rollback")
    assert back.returncode == 0, back.stderr
    assert host_state() == before
