"""Real guests under TCG: up, exec, ps, down, and every way a boot can go wrong.

After each test there must be no QEMU process and no run directory left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import wait_connected
from tests.runtime.conftest import KVMLAB, kvmlab, qemu_pids, wait_for, write_lab

pytestmark = pytest.mark.functional


def test_up_exec_ps_down_leaves_nothing(run_root: Path, tmp_path: Path) -> None:
    lab = write_lab(tmp_path, "life", 'disks = [{ path = "d.qcow2", size = "64M" }]\n')
    up = kvmlab("up", str(lab))
    assert up.returncode == 0, up.stderr
    assert "life/vm" in up.stdout and "total" in up.stdout
    run_dir = run_root / "life" / "vm"
    assert oct(run_dir.stat().st_mode & 0o777) == "0o700"
    assert oct((run_dir / "qmp.sock").stat().st_mode & 0o777) == "0o600"

    uname = kvmlab("exec", "life/vm", "--", "uname", "-r")
    assert uname.returncode == 0, uname.stderr
    assert uname.stdout.strip().endswith("-amd64")
    failing = kvmlab("exec", "life/vm", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (failing.returncode, failing.stdout, failing.stderr) == (7, "out\n", "err\n")
    disk = kvmlab("exec", "life/vm", "--", "sh", "-c", "cat /sys/block/vda/size")
    assert int(disk.stdout) * 512 == 64 * 1024 * 1024

    console = subprocess.Popen(
        [KVMLAB, "console", "life/vm"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_connected(console)
    said = kvmlab("exec", "life/vm", "--", "sh", "-c", "echo hello-console > /dev/ttyS0")
    assert said.returncode == 0, said.stderr
    out, _ = console.communicate(timeout=30)  # closes stdin: the console detaches
    assert console.returncode == 0
    assert b"hello-console" in out
    assert b"hello-console" in (run_dir / "serial.log").read_bytes()

    missing = kvmlab("exec", "life/vm", "--", "no-such-command")
    assert missing.returncode == 3
    assert "no-such-command" in missing.stderr

    ps = kvmlab("ps", "-o", "json")
    rows = json.loads(ps.stdout)["guests"]
    assert [(r["address"], r["state"], r["vcpus"]) for r in rows] == [("life/vm", "running", 1)]
    assert rows[0]["host_cpu_pct"] is not None and rows[0]["guest_cpu_pct"] is not None

    again = kvmlab("up", str(lab))
    assert again.returncode == 2
    assert "already up" in again.stderr

    down = kvmlab("down", "life")
    assert down.returncode == 0, down.stderr
    assert not (run_root / "life").exists()
    assert not qemu_pids(str(run_root))
    assert (tmp_path / "d.qcow2").exists(), "down keeps the lab's disk images"


def test_ctrl_c_during_boot_cleans_up(run_root: Path, tmp_path: Path) -> None:
    lab = write_lab(tmp_path, "intr")
    proc = subprocess.Popen(
        [KVMLAB, "up", str(lab)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(run_root / "intr" / "vm" / "qemu.pid", 30)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not qemu_pids(str(run_root))
    assert not (run_root / "intr").exists()


def test_sigterm_during_boot_cleans_up(run_root: Path, tmp_path: Path) -> None:
    lab = write_lab(tmp_path, "term")
    proc = subprocess.Popen(
        [KVMLAB, "up", str(lab)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(run_root / "term" / "vm" / "qemu.pid", 30)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not qemu_pids(str(run_root))
    assert not (run_root / "term").exists()


def test_qemu_killed_is_detected_and_cleaned(run_root: Path, tmp_path: Path) -> None:
    lab = write_lab(tmp_path, "killed")
    assert kvmlab("up", str(lab)).returncode == 0
    pid = int((run_root / "killed" / "vm" / "qemu.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while qemu_pids(str(run_root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    ps = json.loads(kvmlab("ps", "-o", "json").stdout)["guests"]
    assert [r["state"] for r in ps] == ["dead"]
    gone = kvmlab("exec", "killed/vm", "--", "true")
    assert gone.returncode == 2 and "not running" in gone.stderr
    again = kvmlab("up", str(lab))
    assert again.returncode == 0, again.stderr
    assert "cleaned up killed/vm" in again.stderr
    assert kvmlab("down", "killed").returncode == 0
    assert not (run_root / "killed").exists()


def test_guest_kernel_panic_is_a_launch_failure(run_root: Path, tmp_path: Path) -> None:
    lab = write_lab(tmp_path, "panic", 'append = "rdinit=/no/such/init"\n')
    proc = kvmlab("up", str(lab))
    assert proc.returncode == 3
    assert "QEMU exited while booting" in proc.stderr
    assert "Kernel panic" in proc.stderr, "the serial log tail explains the panic"
    assert not qemu_pids(str(run_root))
    assert not (run_root / "panic").exists()


def test_qemu_refusing_to_start_is_a_launch_failure(run_root: Path, tmp_path: Path) -> None:
    lab = write_lab(tmp_path, "refused", 'cpu = { model = "NoSuchCpu" }\n')
    proc = kvmlab("up", str(lab))
    assert proc.returncode == 3
    assert "command: /usr/bin/qemu-system-x86_64" in proc.stderr
    assert "exit code: 1" in proc.stderr
    assert "NoSuchCpu" in proc.stderr
    assert not (run_root / "refused").exists()


def test_down_of_unknown_lab_is_clear(run_root: Path) -> None:
    proc = kvmlab("down", "nothing")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == "kvmlab: lab nothing is not up (kvmlab ps lists the labs that are)"
    )
