"""A private libvirtd for the libvirt tests (started by ``kvmlab libvirtd start``, stopped
afterwards; the system's libvirtd is never touched)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import cli


@dataclass(frozen=True)
class Daemon:
    """A private daemon and the environment of the kvmlab that runs it."""

    uri: str
    tcp_uri: str | None
    env: dict[str, str]
    root: Path


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory libvirt's QEMU user may enter, for a lab and its disks: pytest's
    temporary directories, and a checkout under /root, are closed to that user."""
    where = Path(tempfile.mkdtemp(prefix="kvmlab-lvt-", dir="/var/tmp"))
    try:
        where.chmod(0o711)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _start(tmp: Path, name: str, tcp_port: int | None = None) -> Daemon:
    if shutil.which("libvirtd") is None:
        pytest.skip("libvirtd is not installed (make deps installs it)")
    env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp / "run")}
    args = ["libvirtd", "start", name, *(["--tcp-port", str(tcp_port)] if tcp_port else [])]
    started = cli(env, *args, timeout=120)
    assert started.returncode == 0, started.stderr
    uris = started.stdout.split()
    return Daemon(uris[0], uris[1] if len(uris) > 1 else None, env, tmp / "run")


def _stop(daemon: Daemon, name: str) -> None:
    from tests.runtime.conftest import qemu_pids

    stopped = cli(daemon.env, "libvirtd", "stop", name, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert not (daemon.root / ".libvirtd" / name).exists()
    assert not qemu_pids(f"guest={name}-"), "a QEMU of the private daemon survived"


@pytest.fixture(scope="module")
def libvirtd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One private libvirtd for the module."""
    daemon = _start(tmp_path_factory.mktemp("libvirtd"), "kvtest")
    try:
        yield daemon
    finally:
        _stop(daemon, "kvtest")


@dataclass(frozen=True)
class FarHost:
    """A second "host": a network namespace of its own, reached from here over a veth pair,
    running a private libvirtd of a kvmlab with its own run directory (its state, domains
    and image store), listening on the namespace's address. The kvmlab under test reaches it
    only through ``uri``, over that link, as it would another machine."""

    uri: str
    netns: str
    address: str
    """Its address on the link."""
    near: str
    """This host's address on the link."""
    daemon: Daemon
    link: str
    """This host's end of the link (``ip link set LINK down`` cuts it)."""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _ip_in(netns: str, *args: str) -> None:
    """``ip`` inside ``netns`` by nsenter (``ip -n`` remounts /, which fails in a chroot)."""
    _ip_argv = ["nsenter", f"--net=/run/netns/{netns}", "--", "ip", *args]
    subprocess.run(_ip_argv, check=True, capture_output=True)


def _left_in(netns: str, wait_s: float = 10.0) -> list[int]:
    """The pids still in ``netns`` once killed ones have had ``wait_s`` to go (read from
    /proc: ``ip netns pids`` would be one more thing that could fail quietly)."""
    import time

    ns = Path(f"/run/netns/{netns}").stat()
    deadline = time.monotonic() + wait_s
    while True:
        inside = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                st = (entry / "ns" / "net").stat()
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (ns.st_dev, ns.st_ino):
                inside.append(int(entry.name))
        if not inside or time.monotonic() > deadline:
            return inside
        time.sleep(0.2)


@contextlib.contextmanager
def far_host(tmp: Path, name: str) -> Iterator[FarHost]:
    """Make the namespace, the link and the daemon; remove all three afterwards."""
    if shutil.which("libvirtd") is None:
        pytest.skip("libvirtd is not installed (make deps installs it)")
    tag = os.getpid() % 100000
    netns, here, there = f"kvmlab-{name}-{tag}", f"kvf{tag}a", f"kvf{tag}b"
    subnet = f"10.253.{tag % 250}"
    near, address = f"{subnet}.1", f"{subnet}.2"
    _ip("netns", "add", netns)
    try:
        _ip("link", "add", here, "type", "veth", "peer", "name", there)
        _ip("link", "set", there, "netns", netns)
        _ip("addr", "add", f"{near}/30", "dev", here)
        _ip("link", "set", here, "up")
        _ip_in(netns, "addr", "add", f"{address}/30", "dev", there)
        _ip_in(netns, "link", "set", there, "up")
        _ip_in(netns, "link", "set", "lo", "up")
        env = {**os.environ, "KVMLAB_RUN_DIR": str(tmp / "far-run")}
        args = ["--tcp-port", "16509", "--netns", netns, "--listen", address]
        daemon = Daemon("", None, env, tmp / "far-run")
        try:
            started = cli(env, "libvirtd", "start", name, *args, timeout=120)
            assert started.returncode == 0, started.stderr
            uri = started.stdout.split()[1]
            assert uri == f"qemu+tcp://{address}:16509/system", started.stdout
            daemon = Daemon(started.stdout.split()[0], uri, env, tmp / "far-run")
            yield FarHost(uri, netns, address, near, daemon, here)
        finally:
            if (daemon.root / ".libvirtd" / name).exists():
                _stop(daemon, name)
            assert not _left_in(netns), "processes left in the far host's namespace"
    finally:
        subprocess.run(["ip", "netns", "delete", netns], check=False)
        subprocess.run(["ip", "link", "delete", here], check=False, capture_output=True)
