"""``kvmlab up`` interrupted or killed at points of a real boot: nothing is lost or left.

Signals are sent when a condition is seen on disk (the lab's directory, QEMU's pid on
record), not after fixed sleeps, so the tests hold on slow and fast hosts alike.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.runtime.conftest import KVMLAB, kvmlab, qemu_pids, running_qemus, write_lab

pytestmark = pytest.mark.functional


def recorded_pid(run_root: Path, lab: str) -> int:
    """QEMU's pid once ``up`` has put it on record, else 0."""
    try:
        return int(json.loads((run_root / lab / "vm" / "guest.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return 0


def start_up(lab: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [KVMLAB, "up", str(lab)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_until(what: str, check: object, proc: subprocess.Popen[str], limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while not callable(check) or not check():
        assert proc.poll() is None, f"up ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{what} not seen"
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("sig", "when"),
    [
        (signal.SIGINT, "lab directory created"),
        (signal.SIGTERM, "QEMU on record"),
        (signal.SIGHUP, "QEMU booting for 1 s"),
    ],
)
def test_a_signal_during_up_stops_everything(
    run_root: Path, tmp_path: Path, sig: signal.Signals, when: str
) -> None:
    lab = write_lab(tmp_path, "sig")
    proc = start_up(lab)
    if when == "lab directory created":
        wait_until(when, lambda: (run_root / "sig").is_dir(), proc)
    else:
        wait_until(when, lambda: recorded_pid(run_root, "sig") > 0, proc)
        if when.endswith("1 s"):
            time.sleep(1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.rstrip().splitlines()[-1].startswith("kvmlab: interrupted while starting lab sig")
    assert "Traceback" not in err and "Exception ignored" not in err and "Task" not in err, err
    assert not qemu_pids(str(run_root)) and not (run_root / "sig").exists()


def test_up_killed_mid_boot_is_found_stopped_and_restartable(
    run_root: Path, tmp_path: Path
) -> None:
    lab = write_lab(tmp_path, "kill")
    proc = start_up(lab)
    wait_until("QEMU on record", lambda: recorded_pid(run_root, "kill") > 0, proc)
    proc.kill()
    proc.communicate()
    qemu = recorded_pid(run_root, "kill")
    # The pid on record may still be the host-view wrapper (it forks its mounts, then execs
    # QEMU under the same pid): wait for the exec, then exactly that one QEMU must run.
    deadline = time.monotonic() + 120
    while running_qemus(str(run_root)) != [qemu]:
        assert time.monotonic() < deadline, f"QEMU {qemu} never ran: {qemu_pids(str(run_root))}"
        time.sleep(0.05)
    assert qemu_pids(str(run_root)) == [qemu]

    rows = json.loads(kvmlab("ps", "-o", "json").stdout)["guests"]
    assert [(r["address"], r["state"], r["pid"]) for r in rows] == [("kill/vm", "orphaned", qemu)]
    again = kvmlab("up", str(lab))
    assert again.returncode == 2 and "kill/vm orphaned" in again.stderr, again.stderr
    assert qemu_pids(str(run_root)) == [qemu]

    down = kvmlab("down", "kill")
    assert down.returncode == 0, down.stderr
    assert "1 guest(s) stopped" in down.stdout
    assert not qemu_pids(str(run_root)) and not (run_root / "kill").exists()

    up = kvmlab("up", str(lab))  # the disk lock and the run state are free again
    assert up.returncode == 0, up.stderr
    assert kvmlab("down", "kill").returncode == 0
    assert not qemu_pids(str(run_root))
