"""The installed ``kvmlab`` run on a results database of one run (three repetitions of a
cpu workload on L0 and L1), as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.results.model import Run, Sample
from kvmlab.results.store import ResultStore

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def kvmlab(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVMLAB_RESULTS": str(db), "COLUMNS": "200"}
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def sample(level: str, value: float, rep: int, metric: str = "events") -> Sample:
    guest = "host" if level == "L0" else "vm"
    accel = "native" if level == "L0" else "tcg"
    return Sample(
        "default",
        guest,
        level,
        accel,
        "cpu",
        metric,
        value,
        "events/s",
        True,
        rep,
        "sysbench cpu run",
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
        store.add(
            run,
            [
                sample(level, v, i)
                for level in ("L0", "L1")
                for i, v in enumerate((100.0, 110.0, 105.0))
            ],
        )
        store.finish(run)
    return path
