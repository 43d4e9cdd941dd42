"""Seed 001's loop on a real nested guest: the timer-storm lab's idle L2 (KVM inside a TCG
L1 on a host without hardware KVM) profiled where its KVM runs, diagnosed, and tracefs left
exactly as found, also when the profile is interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LABS
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
TRACING_STATE = ("ls /sys/kernel/tracing/instances; cat /sys/kernel/tracing/synthetic_events; "
                 "grep -v '^#' /sys/kernel/tracing/events/kvm/*/trigger || true")  # fmt: skip


def kvmlab(
    env: dict[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KVMLAB, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("storm")
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp / "run")}
    up = kvmlab(env, "up", str(LABS / "timer-storm.toml"), timeout=1200)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield env
    finally:
        kvmlab(env, "down", "timer-storm", timeout=600)
        assert not qemu_pids(str(tmp / "run"))


def tracing_state(env: dict[str, str]) -> str:
    got = kvmlab(env, "exec", "timer-storm/l1", "--", "sh", "-c", TRACING_STATE)
    assert got.returncode == 0, got.stderr
    return got.stdout


def test_exits_profile_finds_the_storm_and_diagnose_names_it(storm: dict[str, str]) -> None:
    before = tracing_state(storm)
    run = kvmlab(storm, "exits", "timer-storm/l1/idle", "--seconds", "4", "-o", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    profile = json.loads(run.stdout)
    assert profile["provider"] == "tracepoints" and profile["vendor"] == "svm"
    assert profile["pio"][0]["port"] == 0x608 and profile["pio"][0]["name"] == "ACPI PM timer"
    assert profile["cpu"]["host_percent"] > profile["cpu"]["guest_percent"]
    assert tracing_state(storm) == before, "tracefs is left as it was found"

    diag = kvmlab(storm, "diagnose", "timer-storm/l1/idle", "--seconds", "4", "-o", "json")
    assert diag.returncode == 0, diag.stderr[-3000:]
    findings = json.loads(diag.stdout)["findings"]
    assert findings[0]["rule"] == "acpi-pm-timer-reads"
    assert findings[0]["fix"]["lab"]["clock.timers.kvmclock.present"] is True


def test_tcg_guest_has_no_exits(storm: dict[str, str]) -> None:
    run = kvmlab(storm, "exits", "timer-storm/l1", "--seconds", "1")
    assert run.returncode == 4
    assert "TCG has no VM exits" in run.stderr and "kvmlab exits timer-storm/l1/GUEST" in run.stderr


def test_interrupted_profile_leaves_tracefs_clean(storm: dict[str, str]) -> None:
    """Ctrl-C inside a 120 s window. L1's agent runs one command at a time and the tracer
    holds it, so the test cannot watch the set-up happen: it interrupts after 30 s (the
    set-up takes a few seconds here), and whatever stage that hits, nothing may be left."""
    before = tracing_state(storm)
    proc = subprocess.Popen([KVMLAB, "exits", "timer-storm/l1/idle", "--seconds", "120"],
                            env=storm, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)  # fmt: skip
    time.sleep(30)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "interrupted while profiling" in err
    assert tracing_state(storm) == before, "no instance, trigger or synthetic event is left"
