"""A guest that looks up to kvmlab without QEMU: its run state and a live stand-in process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvmlab.runtime.rundir import GuestRecord, LabDir


@contextmanager
def running_guest(lab: str, address: tuple[str, ...] = ("vm1",)) -> Iterator[Path]:
    """State for ``lab/address`` under ``$KVMLAB_RUN_DIR`` whose pid is a sleeping process
    with the run directory in its command line (as a QEMU of that guest would have)."""
    lab_dir = LabDir.of(lab)
    with lab_dir.locked():
        run_dir = lab_dir.create_guest_dir(address)
    sleeper = subprocess.Popen(  # named as a QEMU is: the program's name comes first
        ["qemu-system-x86_64", "-c", "import time; time.sleep(120)", str(run_dir)],
        executable=sys.executable,
    )
    try:
        GuestRecord(
            lab, list(address), sleeper.pid, ["qemu"], "tcg", "test", 2, 1 << 30, time.time()
        ).save(run_dir)
        yield run_dir
    finally:
        sleeper.kill()
        sleeper.wait()
