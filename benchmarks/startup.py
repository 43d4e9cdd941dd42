"""How fast kvmlab answers: --help, check, render (wall time over repetitions).

Run: .venv/bin/python benchmarks/startup.py [--runs N]
Reports median and spread (min-max) in milliseconds per command; not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
COMMANDS = {
    "kvmlab --help": ["--help"],
    "kvmlab check labs/nested.toml": ["check", str(ROOT / "labs" / "nested.toml")],
    "kvmlab render labs/nested.toml": ["render", str(ROOT / "labs" / "nested.toml")],
    "kvmlab render --format libvirt": [
        "render",
        str(ROOT / "labs" / "nested.toml"),
        "--format",
        "libvirt",
    ],
}


def main() -> None:
    """Time each command ``--runs`` times after one warm-up run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"{'command':34} {'median ms':>10} {'min ms':>8} {'max ms':>8}  (runs={args.runs})")
    for label, argv in COMMANDS.items():
        subprocess.run([KVMLAB, *argv], capture_output=True, check=True)
        samples = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([KVMLAB, *argv], capture_output=True, check=True)
            samples.append((time.perf_counter() - start) * 1000)
        print(
            f"{label:34} {statistics.median(samples):10.0f} {min(samples):8.0f} {max(samples):8.0f}"
        )


if __name__ == "__main__":
    main()
