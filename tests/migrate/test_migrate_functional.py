"""Live migration of a real guest, verified; and the faults: a destination killed mid-way,
the connection cut, Ctrl-C during the migration. One vCPU: QEMU 7.2's TCG corrupts
multi-pass precopy of a guest with two (MACHINE-FACTS; `kvmlab migrate` reports it), which
would make these flaky."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KVMLAB, cli, lab_up
from tests.readme import readme_line
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

SLOW = ["--bandwidth", "2", "--dirty", "5", "--dirty-mem", "64"]
"""A migration that takes minutes (2 MiB/s for ~100 MiB of non-zero pages): time to hit it."""


kvmlab = cli


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("migrate")
    up = readme_line("kvmlab up migrate")  # the README's quick start: up, migrate, down
    assert up == ["up", "migrate", "--variant", "one-vcpu"] and readme_line("kvmlab down migrate")
    with lab_up(tmp, "migrate.toml", "migrate", *up[2:]) as env:
        yield env


def guest_pid(env: dict[str, str]) -> int:
    ps = kvmlab(env, "ps", "-o", "json")
    assert ps.returncode == 0, ps.stderr
    return int(
        next(g["pid"] for g in json.loads(ps.stdout)["guests"] if g["address"] == "migrate/vm")
    )


def leftovers(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["KVMLAB_RUN_DIR"], "migrate", "vm").glob(".migration-*"))


def test_migrate_verifies_and_the_address_follows(lab: dict[str, str]) -> None:
    before = guest_pid(lab)
    migrate = readme_line("kvmlab migrate migrate/vm")
    run = kvmlab(lab, *migrate, "--dirty", "20", "--dirty-mem", "64", "-o", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["verdict"] == "VERIFIED" and out["status"] == "completed"
    times = out["final"]["times"]  # after QEMU 7.2 has computed them (it reports 0 at first)
    assert times["total-time"] > 0 and times["downtime"] > 0
    assert out["final"]["ram"]["transferred"] > 0
    assert out["guest_downtime_ms"] is not None
    # the network's view: UDP at 1 kHz through the guest's forward, echoed in the guest
    net = out["network"]
    assert net["path"].startswith("udp 127.0.0.1:"), net
    assert net["downtime_ms"] > 0 and net["probes_sent"] > 0, net
    assert 0 <= net["probes_lost"] <= net["probes_sent"], net
    probe_port = net["path"].split(":")[1].split()[0]
    held = subprocess.run(
        ["ss", "-lunpH", f"sport = :{probe_port}"], capture_output=True, text=True
    )
    assert held.stdout.strip() == "", "the probe's forward is removed afterwards"
    assert {c["name"] for c in out["checks"]["after"]} == {
        "guest agent",
        "memory pattern",
        "file written before",
        "kernel log",
    }
    after = guest_pid(lab)
    assert after != before and after in qemu_pids(lab["KVMLAB_RUN_DIR"])
    assert before not in qemu_pids(lab["KVMLAB_RUN_DIR"])
    echo = kvmlab(lab, "exec", "migrate/vm", "--", "cat", "/proc/uptime")
    assert echo.returncode == 0 and echo.stdout.split()
    # the host port forward moved with it
    ss = subprocess.run(["ss", "-ltnpH", "sport = :2230"], capture_output=True, text=True)
    assert f"pid={after}," in ss.stdout
    again = kvmlab(lab, "migrate", "migrate/vm", "--dirty", "0", "--dirty-mem", "16")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "verdict: VERIFIED" in again.stdout and "Migration status: completed" in again.stdout
    assert "network downtime (UDP probes at 1 kHz, udp 127.0.0.1:" in again.stdout, again.stdout
    assert [p.name for p in leftovers(lab)] == [".migration-2"]  # the live one only


def test_destination_killed_mid_way_leaves_the_source_running(lab: dict[str, str]) -> None:
    before = guest_pid(lab)
    proc = subprocess.Popen(
        [KVMLAB, "migrate", "migrate/vm", *SLOW],
        env=lab,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    dest, _ = wait_for_destination(lab, before)
    os.kill(dest, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, err[-3000:]
    assert "verdict: FAILED" in out and "check source ok   memory pattern" in out
    assert guest_pid(lab) == before
    assert qemu_pids(lab["KVMLAB_RUN_DIR"]) == [before]
    assert not [p for p in leftovers(lab) if p.name == ".migration-3"]


def test_connection_cut_mid_way_leaves_the_source_running(lab: dict[str, str]) -> None:
    """The migration stream's TCP connection destroyed (``ss -K``), both QEMUs alive: QEMU
    fails the migration, the source goes on and is checked, the destination is stopped."""
    before = guest_pid(lab)
    proc = subprocess.Popen(
        [KVMLAB, "migrate", "migrate/vm", *SLOW],
        env=lab,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, port = wait_for_destination(lab, before)
    cut = subprocess.run(
        ["ss", "-K", "-tnH", f"( sport = :{port} or dport = :{port} )"],
        capture_output=True,
        text=True,
    )
    assert cut.returncode == 0 and cut.stdout.strip(), cut.stderr  # a connection was destroyed
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, err[-3000:]
    assert "verdict: FAILED" in out and "check source ok   memory pattern" in out
    assert guest_pid(lab) == before
    assert qemu_pids(lab["KVMLAB_RUN_DIR"]) == [before]


def listening_port(pid: int) -> int | None:
    """The TCP port a QEMU listens on for the incoming migration (not its host forward),
    once it does."""
    ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    ports = [
        int(line.split()[3].rsplit(":", 1)[1]) for line in ss.splitlines() if f"pid={pid}," in line
    ]
    ports = [p for p in ports if p != 2230]
    assert len(ports) <= 1, ss
    return ports[0] if ports else None


def test_ctrl_c_cancels_and_the_source_is_intact(lab: dict[str, str]) -> None:
    before = guest_pid(lab)
    proc = subprocess.Popen(
        [KVMLAB, "migrate", "migrate/vm", *SLOW],
        env=lab,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for_destination(lab, before)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err[-3000:]
    assert "verdict: CANCELLED" in out and "check source ok   memory pattern" in out
    assert "Traceback" not in err and "Task was destroyed" not in err
    assert qemu_pids(lab["KVMLAB_RUN_DIR"]) == [before]
    assert not [p for p in leftovers(lab) if p.name == ".migration-3"]


def test_migrate_refuses_what_it_cannot_do(lab: dict[str, str]) -> None:
    huge = kvmlab(lab, "migrate", "migrate/vm", "--dirty-mem", "4096")
    assert huge.returncode == 2 and "at most 384 MiB (3/4 of its RAM)" in huge.stderr
    bad = kvmlab(lab, "migrate", "migrate/vm", "--mode", "dirty-limit")
    assert bad.returncode == 2 and "no migration capability 'dirty-limit'" in bad.stderr
    missing = kvmlab(lab, "migrate", "migrate/nothere")
    assert missing.returncode == 2 and "is not up" in missing.stderr
    assert len(qemu_pids(lab["KVMLAB_RUN_DIR"])) == 1
    before = guest_pid(lab)
    broken = kvmlab(lab, "migrate", "migrate/vm", "--qemu", "/bin/false", "--dirty-mem", "8")
    assert broken.returncode == 3, broken.stderr[-2000:]
    assert "destination" in broken.stdout and "check source ok   memory pattern" in broken.stdout
    assert qemu_pids(lab["KVMLAB_RUN_DIR"]) == [before]


def wait_for_destination(env: dict[str, str], source: int) -> tuple[int, int]:
    """The destination QEMU's pid and its migration port, once the migration stream is
    connected (the bulk copy under way): waits on that, not on the clock, so a slower
    host is caught at the same stage."""
    deadline = time.monotonic() + 600
    dest = port = None
    while time.monotonic() < deadline:
        if dest is None:
            others = [p for p in qemu_pids(env["KVMLAB_RUN_DIR"]) if p != source]
            dest = others[0] if others else None
        elif port is None:
            port = listening_port(dest)
        elif established(port):
            return dest, port
        time.sleep(0.1)
    raise AssertionError(f"no migration stream appeared (destination {dest}, port {port})")


def established(port: int) -> bool:
    """Whether a TCP connection to ``port`` is established."""
    ss = subprocess.run(
        ["ss", "-tnH", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
    )
    return bool(ss.stdout.strip())


POKED_PAGE, POKED_WORD = 1000, 7
POKE = f"""pid=$(pidof kvmlab-dirty)
while IFS=' -' read a b rest; do
  [ $((0x$b - 0x$a)) -eq $((64 * 1048576)) ] && base=$a
done < /proc/$pid/maps
printf KVMLABXX | dd of=/proc/$pid/mem bs=1 conv=notrunc \\
  seek=$((0x$base + {POKED_PAGE} * 4096 + {POKED_WORD} * 8)) 2>&1"""
"""Another process in the guest changes one word of kvmlab-dirty's 64 MiB working set
(busybox dd through /proc/PID/mem): a fault from outside the code under test."""


def test_a_word_changed_after_the_resume_fails_the_verdict(lab: dict[str, str]) -> None:
    """Right after the destination resumes (its agent answers only then), the word is
    changed; ``kvmlab migrate`` as typed must say FAILED (exit 5) naming that page and
    word. The same migration without the fault is VERIFIED (the first test)."""
    from kvmlab.guest.agent import GuestAgent

    known = set(leftovers(lab))
    proc = subprocess.Popen(
        [KVMLAB, "migrate", "migrate/vm", "--dirty", "20", "--dirty-mem", "64", "-o", "json"],
        env=lab,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 600
        sock = None
        while sock is None and time.monotonic() < deadline and proc.poll() is None:
            fresh = [p / "qga.sock" for p in leftovers(lab) if p not in known]
            sock = next((s for s in fresh if s.exists()), None)
            time.sleep(0.02)
        assert sock is not None, "no destination QEMU appeared"
        agent = GuestAgent(sock)
        try:
            agent.wait_ready(timeout=600)  # the guest runs on the destination now
            poked = agent.exec(["/bin/sh", "-c", POKE], timeout=60)
        finally:
            agent.close()
        assert poked.returncode == 0, poked.stdout + poked.stderr
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=300)
    assert proc.returncode == 5, err[-3000:]
    doc = json.loads(out)
    assert doc["verdict"] == "FAILED" and doc["status"] == "completed"
    memory = next(c for c in doc["checks"]["after"] if c["name"] == "memory pattern")
    assert not memory["ok"]
    assert f"first={POKED_PAGE} word={POKED_WORD}" in memory["evidence"], memory
    assert "found=0x585842414c4d564b" in memory["evidence"]  # "KVMLABXX", little-endian


POKE_AT = 0x1234567
"""The byte the switch-over hook changes in the destination's guest RAM (guest physical)."""
HOOK = f"""#!/usr/bin/env python3
# Changes one byte of the paused destination QEMU's guest RAM through /proc/PID/mem: the
# RAM is its anonymous read-write mapping of exactly the guest's 512 MiB.
import sys
pid = int(sys.argv[1])
found = []
with open(f"/proc/{{pid}}/maps") as maps:
    for line in maps:
        fields = line.split()
        low, high = (int(x, 16) for x in fields[0].split("-"))
        if fields[1].startswith("rw") and len(fields) == 5 and high - low == 512 << 20:
            found.append(low)
if len(found) != 1:
    sys.exit(f"{{len(found)}} mappings of the guest RAM's size")
with open(f"/proc/{{pid}}/mem", "r+b", buffering=0) as mem:
    mem.seek(found[0] + {POKE_AT})
    byte = mem.read(1)[0]
    mem.seek(found[0] + {POKE_AT})
    mem.write(bytes([byte ^ 0xFF]))
"""


def test_compare_pages_verifies_every_page_and_catches_one_byte(
    lab: dict[str, str], tmp_path: Path
) -> None:
    """``--compare-pages``: the migration as typed compares every page of guest RAM with
    both sides paused; VERIFIED with all pages identical. Then a program run at the
    switch-over (``KVMLAB_AT_SWITCHOVER``, outside kvmlab) flips one byte of the paused
    destination's RAM through /proc/PID/mem: FAILED (exit 5), naming that page."""
    args = ["migrate", "migrate/vm", "--compare-pages", "--dirty", "20", "--dirty-mem", "64"]
    clean = kvmlab(lab, *args, "-o", "json")
    assert clean.returncode == 0, clean.stderr[-3000:]
    doc = json.loads(clean.stdout)
    assert doc["verdict"] == "VERIFIED", doc["checks"]["after"]
    pages = doc["pages"]
    assert pages["differing"] == 0 and pages["compared"] >= (512 << 20) // 4096 - 64
    assert pages["pause_s"] > 0 and pages["error"] is None
    check = next(c for c in doc["checks"]["after"] if c["name"] == "guest RAM pages")
    assert check["ok"] and "identical on both sides" in check["evidence"]

    hook = tmp_path / "poke.py"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    poked = kvmlab({**lab, "KVMLAB_AT_SWITCHOVER": str(hook)}, *args)
    assert poked.returncode == 5, poked.stderr[-3000:]
    page = f"{POKE_AT & ~0xFFF:#x}"
    assert f"1 of {pages['compared']} pages of guest RAM differ" in poked.stdout, poked.stdout
    assert f"guest physical {page}" in poked.stdout
    assert "verdict: FAILED" in poked.stdout
