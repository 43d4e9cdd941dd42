"""What profiling VM exits costs a guest: each provider against none and against perf.

Run: .venv/bin/python benchmarks/exits_overhead.py [--reps N] [--seconds S] [--smoke]

Boots labs/nested.toml (on a host without hardware KVM: L1 under TCG, L2 under KVM inside
it, so the exits are real KVM exits taken where L1's KVM runs) and, in L2, runs sysbench cpu
(1 thread, events/s) and fio randread 4k iodepth 16 on L2's scratch disk (IOPS), each for S
seconds, with one collector running inside L1 over the whole workload:

- ``none``: no collector;
- ``counters``: two QMP ``query-stats`` samples over L2's QMP socket (socat, in L1);
- ``tracepoints``: kvmlab's tracer (tracefs hist triggers, ``exits/trace.sh``);
- ``perf``: ``perf kvm stat record -p`` (``exits/perf.sh``), the reference;
- ``hostprof``: ``--host-profile``'s sampler (``exits/hostprof.sh``: ``perf record -e
  cpu-clock -F 199 -g -p`` on L2's QEMU), its report included.

Collectors are started in the background inside L1 a few seconds before the workload and
outlast it. The modes alternate in a rotating order per repetition (A/B in one run); per
mode and workload: median and min-max over N repetitions, and the slowdown of the median
against ``none``. Not a test: each repetition takes about 5 x 2 x (S + 15) s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
MODES = ("none", "counters", "tracepoints", "perf", "hostprof")
LEAD_S = 6.0
"""Seconds a collector gets to set up inside L1 before the workload starts."""


def kvmlab(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """Run the CLI (stdin closed: exec forwards stdin)."""
    return subprocess.run(
        [KVMLAB, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def collector_argv(mode: str, lab: str, window: float) -> list[str] | None:
    """The collector's command inside L1, run in the background (None for ``none``)."""
    from kvmlab.exits import sampling
    from kvmlab.exits.perfkvm import record_argv
    from kvmlab.exits.tracepoints import run_argv

    pidfile = f"@/run/kvmlab/{lab}/l2/qemu.pid"
    if mode == "tracepoints":
        return run_argv(f"kvmlab_bench_{os.getpid()}", window, pidfile)
    if mode == "perf":
        return record_argv(pidfile, window, f"kvmlab_bench_{os.getpid()}")
    if mode == "hostprof":
        return sampling.run_argv(f"kvmlab_bench_{os.getpid()}", window, sampling.RATE, pidfile)
    if mode == "counters":
        # What the provider does, two query-stats over L2's QMP socket, without the start-up
        # of the Python kvmlab inside the TCG L1 (20-60 s of L1's one vCPU), which is the
        # price of profiling through a slow guest hypervisor, not of the provider.
        sock = f"/run/kvmlab/{lab}/l2/qmp.sock"
        ask = (
            "printf '%s\\n' '{\"execute\":\"qmp_capabilities\"}' "
            '\'{"execute":"query-stats","arguments":{"target":"vcpu"}}\' '
            '\'{"execute":"query-stats","arguments":{"target":"vm"}}\' '
            f"| socat -t 2 - UNIX-CONNECT:{sock} >/dev/null"
        )
        return ["sh", "-c", f"{ask}; sleep {window:g}; {ask}"]
    return None


def workload_argv(name: str, seconds: int, device: str) -> list[str]:
    """The workload in L2 and how its figure is read."""
    if name == "cpu":
        return ["sysbench", "cpu", "--threads=1", f"--time={seconds}", "run"]
    return [
        "fio",
        "--name=o",
        f"--filename={device}",
        "--direct=1",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=16",
        "--ioengine=libaio",
        "--time_based",
        f"--runtime={seconds}",
        "--output-format=json",
    ]


def figure(name: str, out: str) -> float:
    """events/s (sysbench) or IOPS (fio)."""
    if name == "cpu":
        line = next(x for x in out.splitlines() if "events per second" in x)
        return float(line.split(":")[1])
    return float(json.loads(out[out.index("{") :])["jobs"][0]["read"]["iops"])


def one(mode: str, name: str, lab: str, seconds: int, device: str) -> float:
    """One workload run with one collector around it."""
    window = LEAD_S + seconds + 10
    argv = collector_argv(mode, lab, window)
    if argv is not None:
        # in the background inside L1: the agent returns at once, the collector runs on
        start = ["sh", "-c", 'setsid "$@" >/dev/null 2>&1 </dev/null &', "bg", *argv]
        if kvmlab("exec", f"{lab}/l1", "--", *start).returncode != 0:
            raise SystemExit(f"could not start the {mode} collector in L1")
        time.sleep(LEAD_S)
    run = kvmlab("exec", f"{lab}/l1/l2", "--", *workload_argv(name, seconds, device))
    if run.returncode != 0:
        raise SystemExit(f"{name} failed in L2 ({mode}): {run.stderr[-500:]}")
    if argv is not None:  # let the collector finish before the next run
        kvmlab(
            "exec",
            f"{lab}/l1",
            "--",
            "sh",
            "-c",
            "while pgrep -f '[t]race.sh|[p]erf.sh|[p]erf kvm|[q]uery-stats' >/dev/null; do "
            "sleep 1; done",
            timeout=600,
        )
    return figure(name, run.stdout)


def main() -> None:
    """Alternate the modes, print median and spread per mode and workload."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10, help="per workload run")
    parser.add_argument("--smoke", action="store_true", help="check the commands only")
    args = parser.parse_args()
    if args.smoke:
        for mode in MODES:
            argv = collector_argv(mode, "nested", 1.0)
            assert argv is None or argv[0] in ("sh", str(Path(KVMLAB)))
        print(f"{len(MODES)} collector commands built")
        return
    os.environ.setdefault("KVMLAB_RUN_DIR", tempfile.mkdtemp(prefix="kvmlab-overhead-"))
    from kvmlab.runtime.guest_disks import scratch_device
    from kvmlab.spec import load_lab

    loaded = load_lab(ROOT / "labs" / "nested.toml")
    l2 = loaded.lab.find("l1/l2")
    device = scratch_device(l2) if l2 is not None else None
    assert device is not None
    lab = loaded.lab.name
    up = kvmlab("up", str(loaded.path))
    if up.returncode != 0:
        sys.exit(f"kvmlab up failed:\n{up.stderr[-3000:]}")
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        for rep in range(args.reps):
            order = MODES[rep % len(MODES) :] + MODES[: rep % len(MODES)]
            for name in ("cpu", "fio"):
                for mode in order:
                    value = one(mode, name, lab, args.seconds, device)
                    samples.setdefault((mode, name), []).append(value)
                    print(f"rep {rep + 1} {name} {mode}: {value:.1f}", flush=True)
    finally:
        kvmlab("down", lab)
    unit = {"cpu": "events/s", "fio": "IOPS"}
    print(f"\n{'workload':9} {'mode':12} {'median':>9} {'min':>9} {'max':>9}  slowdown vs none")
    for name in ("cpu", "fio"):
        base = statistics.median(samples[("none", name)])
        for mode in MODES:
            values = samples[(mode, name)]
            med = statistics.median(values)
            print(
                f"{name:9} {mode:12} {med:9.1f} {min(values):9.1f} {max(values):9.1f}  "
                f"{100 * (base - med) / base:+.1f}% ({unit[name]}, n={len(values)})"
            )


if __name__ == "__main__":
    main()
