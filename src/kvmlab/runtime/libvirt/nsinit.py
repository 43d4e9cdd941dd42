"""The first program of a private libvirtd's mount namespace: its mounts, then libvirtd.

``unshare --mount ... python -m kvmlab.runtime.libvirt.nsinit PLAN`` runs this inside the
new namespace. ``PLAN`` is JSON (:func:`plan`): the directories to bind over libvirt's
own, an optional ``/dev/kvm`` node of the daemon's own, and libvirtd's argv, which this
process becomes (``exec``, so the daemon keeps this pid and its start time). Every step is
an argv list: no shell sees a path, so a run directory with spaces, quotes or ``;`` is
only a name. It imports nothing of kvmlab's: it starts fast and cannot drag a cycle in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def plan(
    binds: Sequence[tuple[str, str]],
    kvm: tuple[str, int, int, int] | None,
    argv: Sequence[str],
) -> str:
    """The JSON this program takes: ``binds`` (source, target), ``kvm`` (a directory for a
    tmpfs, the node's major, minor and group) or None, and the daemon's ``argv``."""
    return json.dumps({"binds": [list(b) for b in binds], "kvm": kvm, "argv": list(argv)})


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, stdin=subprocess.DEVNULL)


def main(raw: str) -> None:
    """Make the mounts the plan names, then become the daemon."""
    data = json.loads(raw)
    for source, target in data["binds"]:
        _mount("--bind", "--", source, target)
    if data["kvm"] is not None:
        # libvirt checks /dev/kvm as its QEMU user and re-probes QEMU at every define when
        # that differs from what QEMU found: a node on a tmpfs of this namespace that the
        # user can open, bound over /dev/kvm here only (the host's node is not touched)
        directory, major, minor, group = data["kvm"]
        _mount("-t", "tmpfs", "-o", "mode=0755,size=64k", "--", "kvmlab-dev", directory)
        node = Path(directory) / "kvm"
        os.mknod(node, 0o020660, os.makedev(major, minor))
        os.chown(node, 0, group)
        node.chmod(0o660)
        _mount("--bind", "--", str(node), "/dev/kvm")
    argv = data["argv"]
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError) as exc:
        print(f"kvmlab: private libvirtd set-up failed: {exc}", file=sys.stderr)
        sys.exit(3)
