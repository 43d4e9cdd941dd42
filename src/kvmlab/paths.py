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
