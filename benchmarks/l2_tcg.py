"""L2 under TCG inside a TCG guest hypervisor: what its boot and first tool cost, per setting.

Run: .venv/bin/python benchmarks/l2_tcg.py [--runs N] [--variants a,b] [--smoke]

The TCG-in-TCG path is what a host without nested support gets (and the `l2-tcg` variant of
labs/nested.toml). Each variant is labs/nested.toml with L1 at 2 vCPUs (TCG, multi-threaded)
and L2 forced to TCG, changed by one setting:

- ``l2-2vcpu``: L2 with 2 vCPUs (the lab's value);
- ``l2-1vcpu``: L2 with 1 vCPU (on a 2-core host, L2's two TCG vCPU threads compete with
  L1's own two for the same cores);
- ``lpj``: 2 vCPUs and boot options that skip work on L2's kernel command line (``lpj=``
  skips the delay-loop calibration, ``mitigations=off`` the speculation-mitigation patching).

Per run, in alternating order (reversed every other run: the first boot of a session also
warms the host's caches, so give ``--variants`` in both orders when runs are few): ``kvmlab
up`` wall time, L2's boot stages as kvmlab measured them (seconds from QEMU start: kernel,
init, modules, agent), and the wall time of ``kvmlab exec LAB/l1/l2 -- fio --version`` (a
tool's first start over 9p-over-9p). Median and min-max per variant. Not a test: each run
takes minutes.
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
BASE = """
name = "l2tcg"
[guests.l1]
nested = true
vcpus = 2
memory = "3G"
cpu = {{ model = "host-passthrough" }}
[guests.l1.guests.l2]
accel = "tcg"
vcpus = {vcpus}
memory = "1G"
{append}
"""
VARIANTS = {
    "l2-2vcpu": {"vcpus": 2, "append": ""},
    "l2-1vcpu": {"vcpus": 1, "append": ""},
    "lpj": {"vcpus": 2, "append": 'append = "lpj=4000000 mitigations=off"'},
}


def kvmlab(
    env: dict[str, str], *args: str, timeout: float = 3600
) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdin closed."""
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def one_run(variant: str, workdir: Path) -> dict[str, float]:
    """Boot the variant, time a first tool in L2, tear down; the figures."""
    lab = workdir / f"{variant}.toml"
    lab.write_text(BASE.format(**VARIANTS[variant]))
    env = dict(os.environ, KVMLAB_RUN_DIR=str(workdir / "run"))
    start = time.monotonic()
    up = kvmlab(env, "up", str(lab), "-o", "json")
    figures = {"up_s": time.monotonic() - start}
    try:
        if up.returncode != 0:
            raise RuntimeError(f"up failed: {up.stderr.strip()[-400:]}")
        ps = kvmlab(env, "ps", "-o", "json")
        l2 = next(g for g in json.loads(ps.stdout) if g["address"] == "l2tcg/l1/l2")
        if l2.get("accel") != "tcg":
            raise RuntimeError(f"L2 runs under {l2.get('accel')}, not TCG")
        figures.update({f"l2_{k}_s": v for k, v in l2["boot_s"].items()})
        start = time.monotonic()
        tool = kvmlab(env, "exec", "l2tcg/l1/l2", "--", "fio", "--version")
        if tool.returncode != 0:
            raise RuntimeError(f"fio --version failed: {tool.stderr.strip()[-400:]}")
        figures["fio_version_s"] = time.monotonic() - start
    finally:
        kvmlab(env, "down", "l2tcg")
    return figures


def main() -> None:
    """Alternate the variants, print median and spread per figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--smoke", action="store_true", help="check the lab texts only")
    args = parser.parse_args()
    variants = args.variants.split(",")
    with tempfile.TemporaryDirectory(prefix="kvmlab-l2tcg-") as tmp:
        workdir = Path(tmp)
        if args.smoke:
            for name in variants:
                (workdir / f"{name}.toml").write_text(BASE.format(**VARIANTS[name]))
                subprocess.run(
                    [KVMLAB, "check", str(workdir / f"{name}.toml")],
                    check=True,
                    capture_output=True,
                )
            print(f"{len(variants)} variant lab(s) valid")
            return
        samples: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for run in range(args.runs):
            order = variants if run % 2 == 0 else variants[::-1]
            for name in order:
                figures = one_run(name, workdir)
                samples[name].append(figures)
                print(
                    f"run {run + 1} {name}: "
                    + ", ".join(f"{k} {v:.1f}" for k, v in sorted(figures.items())),
                    flush=True,
                )
    print(f"\n{'variant':10} {'figure':18} {'median s':>9} {'min s':>7} {'max s':>7}  runs")
    for name, runs in samples.items():
        for key in sorted({k for r in runs for k in r}):
            values = [r[key] for r in runs if key in r]
            print(
                f"{name:10} {key:18} {statistics.median(values):9.1f} {min(values):7.1f} "
                f"{max(values):7.1f}  {len(values)}"
            )


if __name__ == "__main__":
    main()
