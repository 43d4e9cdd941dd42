"""Nested KVM under load: does L2 under KVM inside L1 survive disk and network stress?

Run: .venv/bin/python benchmarks/soak.py [--lab labs/nested.toml] [--rounds N] [--seconds S]

Boots the lab with kvmlab (its default accelerators: on a host without hardware KVM, L1
under TCG with one vCPU and L2 under KVM inside it), then per round runs inside L2, at the
same time, fio randrw 4k iodepth 16 on L2's scratch disk and iperf3 from L2 to L1 (over
L2's user network), each for S seconds. After each round both guests' agents must answer
and neither kernel log may show an oops, BUG, panic, soft or hard lockup, RCU stall or
hung task. Prints one line per round (fio IOPS, iperf3 Mbit/s, wall s, verdict) and exits
1 if any round failed. Reliability evidence, not a test: it takes rounds x (S + ~20) s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
TROUBLE = re.compile(
    r"Oops|BUG:|Kernel panic|soft lockup|hard LOCKUP|rcu_sched detected stall|"
    r"rcu: INFO|self-detected stall|blocked for more than|general protection"
)


def kvmlab(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """Run the CLI (stdin closed: exec forwards stdin)."""
    return subprocess.run(
        [KVMLAB, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def troubles(address: str) -> list[str]:
    """Kernel-log lines of the guest that name a crash, lockup or stall (agent must answer)."""
    log = kvmlab("exec", address, "--", "dmesg", timeout=300)
    if log.returncode != 0:
        return [f"{address}: its agent did not answer ({log.stderr.strip()[-200:]})"]
    return [f"{address}: {line}" for line in log.stdout.splitlines() if TROUBLE.search(line)]


def stress_round(lab: str, device: str, seconds: int) -> tuple[float, float, str]:
    """fio and iperf3 at once inside L2; their IOPS and Mbit/s, and a problem ('' if none)."""
    script = (
        f"fio --name=soak --filename={device} --direct=1 --rw=randrw --bs=4k --iodepth=16 "
        f"--ioengine=libaio --time_based --runtime={seconds} --output-format=json "
        f"> /tmp/fio.json 2>&1 & iperf3 -c 10.0.2.2 -t {seconds} -J > /tmp/iperf.json 2>&1; "
        "wait; cat /tmp/fio.json; echo @@; cat /tmp/iperf.json"
    )
    run = kvmlab(
        "exec",
        f"{lab}/l1/l2",
        "--timeout",
        str(seconds * 20 + 300),
        "--",
        "sh",
        "-c",
        script,
        timeout=seconds * 20 + 400,
    )
    if run.returncode != 0:
        return 0.0, 0.0, f"stress command failed ({run.returncode}): {run.stderr.strip()[-300:]}"
    fio_text, _, iperf_text = run.stdout.partition("@@")
    try:
        job = json.loads(fio_text[fio_text.index("{") :])["jobs"][0]
        iops = float(job["read"]["iops"]) + float(job["write"]["iops"])
        mbps = float(json.loads(iperf_text)["end"]["sum_received"]["bits_per_second"]) / 1e6
    except (ValueError, KeyError, IndexError) as exc:
        return 0.0, 0.0, f"unreadable fio/iperf3 output ({exc}): {run.stdout[-300:]}"
    return iops, mbps, ""


def main() -> None:
    """Boot the lab, stress L2 round after round, check both kernels, tear down."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", type=Path, default=ROOT / "labs" / "nested.toml")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=int, default=60, help="per round (fio and iperf3)")
    parser.add_argument("--smoke", action="store_true", help="one 5 s round")
    args = parser.parse_args()
    rounds, seconds = (1, 5) if args.smoke else (args.rounds, args.seconds)
    os.environ.setdefault("KVMLAB_RUN_DIR", tempfile.mkdtemp(prefix="kvmlab-soak-"))
    from kvmlab.runtime.guest_disks import scratch_device
    from kvmlab.spec import load_lab

    loaded = load_lab(args.lab)
    lab = loaded.lab.name
    l2 = loaded.lab.find("l1/l2")
    device = scratch_device(l2) if l2 is not None else None
    if device is None:
        sys.exit(f"{args.lab}: needs a guest l1 holding l2 with a raw scratch disk")
    start = time.monotonic()
    up = kvmlab("up", str(args.lab))
    if up.returncode != 0:
        sys.exit(f"kvmlab up failed:\n{up.stderr[-3000:]}")
    accel = re.search(r"l1/l2 is up inside \S+ \((\w+),", up.stderr)
    print(
        f"lab {lab} up in {time.monotonic() - start:.0f} s; L2 under "
        f"{accel.group(1) if accel else '?'}; {rounds} round(s) of {seconds} s"
    )
    survived = 0
    try:
        kvmlab("exec", f"{lab}/l1", "--", "iperf3", "-s", "-D")
        print(f"{'round':>5} {'fio IOPS':>10} {'iperf3 Mbit/s':>14} {'wall s':>7}  verdict")
        for n in range(1, rounds + 1):
            t0 = time.monotonic()
            iops, mbps, problem = stress_round(lab, device, seconds)
            found = [problem] if problem else []
            found += troubles(f"{lab}/l1") + troubles(f"{lab}/l1/l2")
            survived += not found
            verdict = "ok" if not found else "FAILED: " + "; ".join(found)[:500]
            print(
                f"{n:>5} {iops:>10.0f} {mbps:>14.1f} {time.monotonic() - t0:>7.0f}  {verdict}",
                flush=True,
            )
            if found:
                break
    finally:
        # the smoke run (the test suite's) kills the lab: a graceful nested stop is tested
        # elsewhere and costs a minute here
        down = kvmlab("down", lab, *(["--force"] if args.smoke else []))
        print(f"down: exit {down.returncode}")
    print(f"{survived} of {rounds} round(s) survived")
    sys.exit(0 if survived == rounds else 1)


if __name__ == "__main__":
    main()
