"""``kvmlab bench``: the suite at L0 and in the lab's guests, stored as one run."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kvmlab import __version__
from kvmlab.bench.executor import GuestExecutor, HostExecutor, Place
from kvmlab.bench.runner import LevelRunner, Progress
from kvmlab.bench.suite import Settings
from kvmlab.guest.image import GuestImage
from kvmlab.results.model import Run
from kvmlab.results.store import ResultStore
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.network import SLIRP_HOST, user_net
from kvmlab.spec import Guest, LoadedLab

SCRATCH_PARENT = Path("/var/tmp")
"""Where L0's fio file lives: on disk (O_DIRECT), not a tmpfs."""


def host_place(scratch: Path) -> Place:
    """The host as a level."""
    return Place("host", "L0", "native", os.cpu_count() or 1, str(scratch), "127.0.0.1")


def guest_place(lab: str, path: tuple[str, ...], guest: Guest, accel: str) -> Place:
    """A guest as a level: its first disk as the fio target, slirp's host as its parent."""
    disk = "/dev/vda" if guest.boot == "image" and guest.disks else None
    parent = SLIRP_HOST if user_net(lab, path, guest) is not None else None
    level = f"L{len(path)}"
    return Place("/".join(path), level, accel, guest.vcpus, disk, parent)


def run_bench(
    loaded: LoadedLab,
    settings: Settings,
    levels: set[str],
    store: ResultStore,
    host: labrun.HostAccel,
    host_facts: dict[str, Any],
    image: Callable[[], GuestImage],
    progress: Progress,
    variant: str = "default",
) -> int:
    """Measure the suite at the requested levels; returns the stored run's id.

    Samples are stored as they are measured; the run is marked complete only if
    every level finished (Ctrl-C or a failure leaves it incomplete, data kept).
    """
    run = Run(0, loaded.lab.name, str(loaded.path), loaded.digest, settings.suite, __version__,
              time.time(), host=host_facts)  # fmt: skip
    run_id = store.start(run)
    runner = LevelRunner(store, run_id, variant, settings, progress)
    complete = False
    scratch = Path(tempfile.mkdtemp(prefix="kvmlab-fio-", dir=SCRATCH_PARENT))
    try:
        host_exec = HostExecutor(host_place(scratch))
        if "L0" in levels:
            runner.workloads(host_exec, host_exec)
        if "L1" in levels:
            with ExitStack() as stack:
                machines: list[Machine] = stack.enter_context(
                    labrun.started(loaded, host, image, progress=progress)
                )
                for machine in machines:
                    path = machine.config.address
                    guest = loaded.lab.guests[path[0]]
                    place = guest_place(loaded.lab.name, path, guest, machine.config.accel)
                    executor = GuestExecutor(place, machine)
                    runner.boot(executor, machine.boot)
                    runner.workloads(executor, host_exec)
        complete = True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        store.finish(run_id, complete)
    return run_id
