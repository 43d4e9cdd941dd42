"""The guest testpmd's driver directory trim, run on this host as the guest runs it (the
guest sees the host's root): in its own mount namespace only the drivers it needs remain,
and the host's directory is untouched."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kvmlab.net.guest_dpdk import GUEST_DRIVERS, TRIM

PMDS = sorted(Path("/usr/lib").glob("*/dpdk/pmds-*"))


def _private_mounts() -> bool:
    """Whether a mount namespace of private mounts can be made here (not in a chroot,
    whose root is no mount point: a guest's root, an overlay, always is)."""
    probe = ["unshare", "--mount", "--propagation", "private", "true"]
    return shutil.which("unshare") is not None and subprocess.run(probe).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")
@pytest.mark.skipif(not PMDS, reason="no DPDK drivers here")
@pytest.mark.skipif(shutil.which("dpdk-testpmd") is None, reason="no dpdk-testpmd here")
@pytest.mark.skipif(os.geteuid() == 0 and not _private_mounts(), reason="no private mounts here")
def test_only_the_drivers_testpmd_needs_are_left_in_its_namespace(tmp_path: Path) -> None:
    pmds = PMDS[0]
    before = sorted(p.name for p in pmds.iterdir())
    show = "import os, sys; print(' '.join(sorted(os.listdir(sys.argv[1]))))"
    trim = ["unshare", "--mount", "--propagation", "private", "sh", "-c", TRIM, "trim"]
    ran = subprocess.run(
        [*trim, str(tmp_path / "w"), " ".join(GUEST_DRIVERS), "-c", show, str(pmds)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = ran.stdout.split()
    assert "librte_net_virtio.so" in seen and "librte_mempool_ring.so" in seen
    assert not [n for n in seen if "net_mlx4" in n or "baseband" in n], seen
    assert len(seen) < len(before) / 2
    assert "DPDK drivers in testpmd's mount namespace:" in ran.stderr
    assert sorted(p.name for p in pmds.iterdir()) == before, "the host's directory is as it was"
