"""Measure boot stages and memory-heavy work for each way of sharing the host root.

Run from the repository root: ``.venv/bin/python -m tests.guest.measure_share [RUNS]``.
Every variant boots RUNS times (interleaved, so host noise hits all alike); each boot runs
the workloads once. Prints one line per sample and a median table, as used in
kvmlab.guest.initramfs.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kvmlab.guest.image import ShareKind, build_image
from kvmlab.guest.kernel import KernelFlavour
from tests.guest.harness import booted

# (name, share, kernel flavour, memfd share=on RAM)
VARIANTS: list[tuple[str, ShareKind, KernelFlavour, bool]] = [
    ("9p/generic", "9p", "generic", False),
    ("virtiofs/generic", "virtiofs", "generic", True),
    ("virtiofs/cloud", "virtiofs", "cloud", True),
    ("9p/generic+memfd", "9p", "generic", True),
]
WORKLOADS = {
    # memory: a cache-resident loop, then 512 MiB blocks of fresh guest RAM, then tmpfs.
    "sysbench-mem": [
        "sysbench",
        "memory",
        "--memory-block-size=1M",
        "--memory-total-size=8G",
        "--threads=1",
        "run",
    ],
    "sysbench-mem-512M": [
        "sysbench",
        "memory",
        "--memory-block-size=512M",
        "--memory-total-size=2G",
        "--threads=1",
        "run",
    ],
    "dd-shm": ["dd", "if=/dev/zero", "of=/dev/shm/fill", "bs=1M", "count=400"],
    # file reads through the share: many small files, one big file.
    "py-imports": [
        "python3",
        "-c",
        "import asyncio, email.mime.multipart, http.server, json, "
        "unittest, xml.dom.minidom, argparse, decimal",
    ],
    "read-qemu": ["sh", "-c", "cat /usr/bin/qemu-system-x86_64 /usr/bin/fio > /dev/null"],
    # control: CPU only.
    "sysbench-cpu": ["sysbench", "cpu", "--cpu-max-prime=2000", "--events=2000", "run"],
    "exec-true": ["true"],
}


def main(runs: int) -> None:
    samples: dict[str, dict[str, list[float]]] = {v[0]: {} for v in VARIANTS}
    images = {(s, f): build_image(s, flavour=f) for _, s, f, _ in VARIANTS}
    for run in range(runs):
        for name, share, flavour, memfd in VARIANTS:
            with (
                tempfile.TemporaryDirectory(prefix="kvmlab-measure-") as tmp,
                booted(images[share, flavour], Path(tmp), shared_memory=memfd) as guest,
            ):
                row = guest.times.stages()
                for wname, argv in WORKLOADS.items():
                    t = time.monotonic()
                    result = guest.agent.exec(argv, timeout=600, check=True)
                    row[wname] = time.monotonic() - t
                    if wname == "sysbench-mem":
                        m = re.search(rb"total time:\s+([\d.]+)s", result.stdout)
                        row["sysbench-mem(own)"] = float(m.group(1)) if m else -1.0
            for k, v in row.items():
                samples[name].setdefault(k, []).append(v)
            cells = " ".join(f"{k}={v:.2f}" for k, v in row.items())
            print(f"run {run} {name:18s} {cells}", flush=True)
    print("\nmedians over", runs, "runs")
    for name, cols in samples.items():
        print(f"{name:18s} " + " ".join(f"{k}={statistics.median(v):.2f}" for k, v in cols.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
