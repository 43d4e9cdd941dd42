"""Where kvmlab keeps run-time state (sockets, logs) by default."""

from __future__ import annotations

import os
from pathlib import Path


def run_root() -> Path:
    """``$KVMLAB_RUN_DIR``, else ``/run/kvmlab`` for root, else ``$XDG_RUNTIME_DIR/kvmlab``."""
    if env := os.environ.get("KVMLAB_RUN_DIR"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/kvmlab")
    return Path(os.environ.get("XDG_RUNTIME_DIR", f"/tmp/kvmlab-{os.geteuid()}")) / "kvmlab"


def guest_run_dir(lab: str, address: tuple[str, ...]) -> Path:
    """The private run directory of one guest: ``RUN_ROOT/LAB/L1[/L2]``."""
    return run_root().joinpath(lab, *address)
