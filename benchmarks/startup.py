"""How fast kvmlab answers: --help, check, ps, render (wall time over repetitions).

Run: .venv/bin/python benchmarks/startup.py [--runs N] [--imports] [--exec LAB/GUEST]
Reports median and spread (min-max) in milliseconds per command; not a test. ``ps`` lists
an empty run directory of its own (no guest to sample for 0.5 s). The commands run with
their bytecode cached, as on a user's machine (PYTHONDONTWRITEBYTECODE is dropped).

``--exec LAB/GUEST`` adds ``kvmlab exec LAB/GUEST -- true`` against a guest you started
(``kvmlab up basic``): its time includes the guest agent's answers, which under TCG are
most of it.

``--imports`` adds where each command's import time goes: the command once more under
``python -X importtime``, the modules' own (self) times summed per top-level package
(kvmlab split by its subpackages), the largest first, in milliseconds, with the total of
all imports and the number of modules imported.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
COMMANDS = {
    "kvmlab --help": ["--help"],
    "kvmlab check labs/nested.toml": ["check", str(ROOT / "labs" / "nested.toml")],
    "kvmlab ps": ["ps"],
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
    parser.add_argument("--imports", action="store_true", help="add the import-time profile")
    parser.add_argument("--exec", metavar="LAB/GUEST", help="also time exec on this guest")
    args = parser.parse_args()
    user_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = dict(user_env)
    print(f"{'command':34} {'median ms':>10} {'min ms':>8} {'max ms':>8}  (runs={args.runs})")
    with tempfile.TemporaryDirectory(prefix="kvmlab-startup-") as run_dir:
        env["KVMLAB_RUN_DIR"] = run_dir
        for label, argv in COMMANDS.items():
            _report(label, _times([KVMLAB, *argv], env, args.runs))
        if args.exec:  # the user's run directory: where the guest is
            argv = [KVMLAB, "exec", args.exec, "--", "true"]
            _report(f"kvmlab exec {args.exec} -- true", _times(argv, user_env, args.runs))
        if args.imports:
            for label, argv in COMMANDS.items():
                print()
                print(_import_profile(label, argv, env))


def _report(label: str, samples: list[float]) -> None:
    print(f"{label:34} {statistics.median(samples):10.0f} {min(samples):8.0f} {max(samples):8.0f}")


def _times(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    """Wall milliseconds of ``runs`` runs of ``argv``, after one warm-up run."""
    subprocess.run(argv, capture_output=True, check=True, env=env)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _import_profile(label: str, argv: list[str], env: dict[str, str], top: int = 8) -> str:
    """One command's import time by package (``-X importtime``'s self times), largest first."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", KVMLAB, *argv],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    by_package: collections.Counter[str] = collections.Counter()
    modules = 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = (f.strip() for f in line[len("import time:") :].split("|"))
        parts = name.split(".")
        package = ".".join(parts[:2]) if parts[0] == "kvmlab" and len(parts) > 1 else parts[0]
        by_package[package] += int(self_us)
        modules += 1
    total = sum(by_package.values()) / 1000
    shown = ", ".join(f"{p} {us / 1000:.0f}" for p, us in by_package.most_common(top))
    return f"{label}: imports {total:.0f} ms in {modules} modules; by package (ms): {shown}"


if __name__ == "__main__":
    main()
