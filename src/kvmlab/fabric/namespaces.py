"""Network namespaces of kvmlab's own: a lab's devices (bridges, taps, OVS's datapath
ports) live in one, so nothing touches the host's interfaces or routes, and deleting it
removes every device in it, persistent taps included, even after a crash.

Names are ``kvmlab-<lab>-<part>``, derived from the lab, never read back from disk: kvmlab
records that it is about to create one before it does, and deletes only that name.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from pathlib import Path

from kvmlab.errors import ProcessFailure, StateError

NETNS_DIR = Path("/run/netns")
_OURS = re.compile(r"^kvmlab-[a-z][a-z0-9-]{0,70}$")


def ns_name(lab: str, part: str) -> str:
    """``kvmlab-<lab>-<part>`` (lab and part are validated names)."""
    return f"kvmlab-{lab}-{part}"


def ours(name: str) -> bool:
    """Whether ``name`` has the form of a namespace name kvmlab gives."""
    return _OURS.match(name) is not None


def exists(name: str) -> bool:
    """Whether a named namespace of that name exists (:class:`StateError` for a name
    kvmlab would never give, e.g. one read from a tampered record)."""
    if not _OURS.match(name):
        raise StateError(f"{name!r} is not a network namespace name kvmlab gives")
    return (NETNS_DIR / name).exists()


def ip(*args: str, netns: str | None = None, what: str = "") -> str:
    """``ip`` (inside ``netns`` when given); :class:`ProcessFailure` when it fails."""
    argv = exec_argv(netns, ["ip", *args]) if netns else ["ip", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise ProcessFailure(
            what or f"ip {' '.join(args)} failed",
            argv,
            done.returncode,
            done.stderr.splitlines()[-5:],
        )
    return done.stdout


def create(name: str) -> None:
    """Create a namespace with its loopback up; :class:`StateError` when one of that name
    exists (kvmlab did not record it, so it is not kvmlab's to reuse or delete)."""
    if exists(name):
        raise StateError(
            f"network namespace {name} exists and is not on kvmlab's record: "
            "a kvmlab with another KVMLAB_RUN_DIR may be running the same lab; "
            f"if `ip netns pids {name}` prints nothing it is a leftover: "
            f"`ip netns del {name}`"
        )
    ip("netns", "add", name, what=f"creating network namespace {name}")
    ip("link", "set", "lo", "up", netns=name, what=f"bringing lo up in {name}")


def delete(name: str) -> None:
    """Delete a namespace kvmlab recorded (gone already is fine); its devices go with it."""
    if exists(name):
        with contextlib.suppress(ProcessFailure):
            ip("netns", "del", name, what=f"deleting network namespace {name}")
        if exists(name):
            raise StateError(f"could not delete network namespace {name}: `ip netns del {name}`")


def exec_argv(name: str, argv: list[str]) -> list[str]:
    """``argv`` run inside the namespace: ``nsenter --net`` execs it (the pid is argv's).
    Not ``ip netns exec`` or ``ip -n``: they also remount / as a slave, which fails where
    / is no mount point (a chroot, as the fresh-machine check runs)."""
    if not _OURS.match(name):
        raise StateError(f"{name!r} is not a network namespace name kvmlab gives")
    return ["nsenter", f"--net={NETNS_DIR / name}", "--", *argv]
