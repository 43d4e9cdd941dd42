"""The stub backend registered for a test, and a factory of its labs that owns every
process they start: at teardown each one still alive is killed, and the test fails for it
(Firecracker's factory, over kvmlab's own run root)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kvmlab.guest.image import GuestImage
from kvmlab.progress import Relay
from kvmlab.runtime import backends
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.hostaccel import HostAccel
from kvmlab.spec import LoadedLab, load_lab
from tests import fakebackend
from tests.fakebackend.backend import StubBackend
from tests.runtime.conftest import pids_mentioning

GUEST = {"vcpus": "1", "memory": '"128M"', "accel": '"tcg"', "kernel": '"vmlinuz"'}
"""A stub guest's table: a kernel boot (no image is built, no host share is set up)."""


@dataclass
class StubLabs:
    """Lab files of stub guests, and how to start them, under a short private root (the
    sockets of a guest inside a guest hypervisor fit a unix socket path)."""

    root: Path
    progress: list[str] = field(default_factory=list)

    def lab(self, name: str, guests: dict[str, dict[str, str]], extra: str = "") -> LoadedLab:
        """A lab of the stub guests ``guests`` (address -> its keys beyond :data:`GUEST`,
        as TOML values), loaded."""
        path = self.root / "labs" / f"{name}.toml"
        path.parent.mkdir(exist_ok=True)
        (path.parent / "vmlinuz").touch()
        tables = [
            f"[guests.{'.guests.'.join(a.split('/'))}]\n"
            + "".join(f"{k} = {v}\n" for k, v in {**GUEST, **more}.items())
            for a, more in guests.items()
        ]
        path.write_text(f'name = "{name}"\n{extra}\n' + "\n".join(tables))
        return load_lab(path)

    def launch(self, backend: StubBackend | None = None) -> labrun.Launch:
        """How the tests start stub guests (no image: they boot a kernel, never run)."""

        def no_image() -> GuestImage:
            raise AssertionError("a stub lab asked for the default image")

        return labrun.Launch(
            HostAccel("tcg", "stub host"),
            no_image,
            backend or StubBackend(),
            Relay(self.progress.append),
        )


@pytest.fixture
def stub_labs(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubLabs]:
    root = Path(tempfile.mkdtemp(prefix="kvs", dir="/tmp"))
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(root / "run"))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises here
    backends.register(fakebackend.KIND)
    try:
        yield StubLabs(root)
    finally:
        backends.unregister(fakebackend.NAME)
        signal.signal(signal.SIGINT, previous)
        leftovers = pids_mentioning(str(root))
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
        assert not leftovers, f"processes of stub guests left behind: {leftovers}"
