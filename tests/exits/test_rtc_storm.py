"""The idle-guest exit-storm write-up's own mechanism end to end, as the shipped lab's
comment types it: ``kvmlab exits --compare labs/rtc-storm.toml --guest l1/idle`` boots the
storm (an idle L2 ticking the RTC at 1024 Hz through ``kvmlab-rtc``, a ``background``
command) and its fix (the ``hpet`` variant), profiles L2 where its KVM runs, diagnoses it
and verifies the fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import cli
from tests.readme import readme_line
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

RTC_PORTS = (0x70, 0x71)


def _rtc_exits(variant: dict[str, object]) -> int:
    profile = variant["profile"]
    assert isinstance(profile, dict)
    return sum(p["count"] for p in profile["pio"] if p["port"] in RTC_PORTS)


def test_the_rtc_storm_is_found_diagnosed_and_its_fix_verified(tmp_path: Path) -> None:
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp_path / "run")}
    argv = readme_line("kvmlab exits rtc-storm --compare")  # the README's quick start
    ran = cli(env, *argv, "--settle", "1", "--seconds", "3", "-o", "json", timeout=1800)
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert not qemu_pids(str(tmp_path / "run")) and not (tmp_path / "run" / "rtc-storm").exists()
    doc = json.loads(ran.stdout)
    storm, fixed = doc["variants"]["default"], doc["variants"]["hpet"]
    assert storm["profile"]["provider"] == "tracepoints"
    # found: the RTC's index and data ports, written and read on every tick
    directions = {(p["port"], p["write"]) for p in storm["profile"]["pio"] if p["count"]}
    assert {(0x70, True), (0x71, False)} <= directions, storm["profile"]["pio"]
    # diagnosed, with the HPET fix
    findings = {f["rule"]: f for f in storm["findings"]}
    assert "rtc-port-storm" in findings, list(findings)
    assert findings["rtc-port-storm"]["fix"]["lab"]["clock.timers.hpet.present"] is True
    # fixed (an HPET takes the RTC's interrupt line) and verified by the same profile
    verify = [c for c in doc["verify"] if c["rule"] == "rtc-port-storm"]
    assert verify and all(c["dropped"] for c in verify), verify
    assert _rtc_exits(fixed) * 100 < _rtc_exits(storm), (_rtc_exits(fixed), _rtc_exits(storm))
    assert "rtc-port-storm" not in {f["rule"] for f in fixed["findings"]}
