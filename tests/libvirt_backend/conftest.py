"""A private libvirtd for the libvirt tests (started by ``kvmlab libvirtd start``, stopped
afterwards; the system's libvirtd is never touched)."""

from __future__ import annotations

import os
import shutil
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
