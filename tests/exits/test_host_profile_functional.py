"""``kvmlab exits --host-profile`` on a real nested lab: seed 001's idle L2 (the timer-storm
lab) sampled where its QEMU runs, inside its L1, by perf through L1's agent; and L1's own
QEMU sampled on this host. Booted once for the module.

What it shows: the idle L2's QEMU threads are there by name (its main loop, a KVM vCPU
thread per vCPU), the vCPU threads spend part of their samples in guest mode (L1's perf
sees them as guest samples: KVM takes the clock interrupt that ends guest mode on its
VM-entry path), and nothing is left inside L1 afterwards (no perf, no recording), also
when the profile is interrupted.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from tests.conftest import LABS, cli, interrupted_after
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

L2 = "timer-storm/l1/idle"
LEFTOVERS = (
    # the agent's /tmp and the /tmp of L2's QEMU (perf runs in its mount namespace), and
    # any perf still running
    "ls -d /tmp/kvmlab_* 2>/dev/null; "
    'f=/run/kvmlab/timer-storm/idle/qemu.pid; [ -r "$f" ] && '
    'nsenter -t "$(cat "$f")" -m -r sh -c "ls -d /tmp/kvmlab_* 2>/dev/null"; '
    "for p in /proc/[0-9]*; do read -r c < $p/comm 2>/dev/null && "
    '[ "$c" = perf ] && echo "perf ${p#/proc/}"; done; true'
)


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The shipped timer-storm lab up for the module; afterwards down, nothing left."""
    run_root = tmp_path_factory.mktemp("hostprof") / "run"
    env = {**os.environ, "KVMLAB_RUN_DIR": str(run_root)}
    up = cli(env, "up", str(LABS / "timer-storm.toml"), timeout=1200)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield env
        down = cli(env, "down", "timer-storm", timeout=600)
        assert down.returncode == 0, down.stderr
    finally:
        cli(env, "down", "timer-storm", "--force", timeout=600)
    assert not qemu_pids(str(run_root))


def leftovers(env: dict[str, str]) -> str:
    """What a host profile could leave inside L1 (empty: nothing); perf that is still
    ending after an interrupted run is waited for (it stops within seconds)."""
    deadline = time.monotonic() + 60
    while True:
        got = cli(env, "exec", "timer-storm/l1", "--", "sh", "-c", LEFTOVERS)
        assert got.returncode == 0, got.stderr
        if not got.stdout.strip() or time.monotonic() > deadline:
            return got.stdout.strip()
        time.sleep(2)


def test_the_idle_l2_is_sampled_inside_l1(storm: dict[str, str]) -> None:
    run = cli(storm, "exits", L2, "--host-profile", "--seconds", "4", "-o", "json", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert (doc["schema"], doc["kind"], doc["address"]) == (1, "host_profile", L2)
    assert (doc["where"], doc["accel"]) == ("inside timer-storm/l1", "kvm")
    assert doc["samples"] > 0 and doc["perf"]["version"].startswith("perf version")
    threads = {t["name"]: t for t in doc["threads"]}
    roles = {t["role"] for t in doc["threads"]}
    assert {"CPU 0/KVM", "CPU 1/KVM"} <= set(threads), sorted(threads)  # 2 vCPUs in the lab
    assert "main loop" in roles and any(n.startswith("qemu-system") for n in threads)
    vcpus = [threads["CPU 0/KVM"], threads["CPU 1/KVM"]]
    guest = sum(t["classes"]["guest"]["samples"] for t in vcpus)
    busy = sum(t["samples"] for t in vcpus)
    assert guest > 0, ("no guest-mode sample on the KVM vCPU threads", vcpus, doc["notes"])
    assert any(t["classes"]["guest"]["share"] > 0 for t in vcpus)
    assert guest <= busy
    assert doc["classes"]["guest"]["samples"] >= guest
    assert doc["guest_cpu_percent"] is not None, "read through L2's agent"
    for finding in doc["findings"]:
        assert finding["fix"]["look"] and finding["source"], finding
    assert leftovers(storm) == "", "no perf and no recording left inside L1"


def test_l1s_own_qemu_is_sampled_on_this_host(storm: dict[str, str]) -> None:
    run = cli(storm, "exits", "timer-storm/l1", "--host-profile", "--seconds", "2", "-o", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert doc["where"] == "this host"
    vcpus = [t for t in doc["threads"] if t["role"] == "vCPU"]
    assert vcpus and all(t["name"].endswith(f"/{doc['accel'].upper()}") for t in vcpus)
    if doc["accel"] == "tcg":  # L1 runs L2 and its storm: its vCPU is busy in QEMU's code
        assert doc["classes"]["guest"]["samples"] == 0
        assert sum(t["classes"]["qemu_user"]["samples"] for t in vcpus) > 0
        assert any("under TCG there is no guest mode" in n for n in doc["notes"])
    text = cli(storm, "exits", "timer-storm/l1", "--host-profile", "--seconds", "1")
    assert text.returncode == 0, text.stderr[-3000:]
    assert "its QEMU's host CPU sampled for 1 s on this host" in text.stdout
    assert "by thread" in text.stdout and "busiest symbols" in text.stdout


def test_an_interrupted_profile_leaves_nothing_in_l1(storm: dict[str, str]) -> None:
    """Ctrl-C inside a 120 s window (after 15 s: perf is recording by then); the recorder
    is stopped and its directory removed from here, through L1's agent."""
    status, _, err = interrupted_after(storm, 15, "exits", L2, "--host-profile", "--seconds", "120")
    assert status == 130, err
    assert "interrupted while sampling the host CPU" in err
    assert leftovers(storm) == ""
