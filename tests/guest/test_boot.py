"""Boot the default guest image under TCG and use it through the guest agent."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.guest.image import GuestImage, build_default_image

from .harness import Guest, qemu_argv


@pytest.fixture(scope="session")
def default_image() -> GuestImage:
    """Built once per cache ($KVMLAB_CACHE or ~/.cache/kvmlab): later sessions reuse it."""
    return build_default_image()


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short 0700 directory (unix socket paths are limited to 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="kvmlab-test-") as tmp:
        yield Path(tmp)


@pytest.mark.functional
def test_default_image_boots_to_agent(default_image: GuestImage, workdir: Path) -> None:
    guest = Guest(default_image, workdir)
    try:
        guest.start(qemu_argv(default_image, workdir, hostname="kvmlab-test"), ready_timeout=90)
        uname = guest.agent.exec(["uname", "-r"], timeout=30, check=True)
        assert uname.stdout.decode().strip() == default_image.kernel_release
        fio = guest.agent.exec(["fio", "--version"], timeout=30, check=True)
        assert fio.stdout.startswith(b"fio-")
        host = guest.agent.exec(["hostname"], timeout=30, check=True)
        assert host.stdout.decode().strip() == "kvmlab-test"
        # The host root is read-only underneath; writes land in the guest's tmpfs overlay.
        probe = f"/kvmlab-overlay-probe-{os.getpid()}"
        guest.agent.exec(["touch", probe], timeout=30, check=True)
        assert not Path(probe).exists()
        stages = guest.times.stages()
        # every stage measured and in order; how long they take is the benchmarks' business
        assert stages["total"] > 0 and all(v >= 0 for v in stages.values()), stages
    except BaseException:
        print("serial console:\n" + guest.serial_log[-4000:])
        print("qemu log:\n" + (workdir / "qemu.log").read_text(errors="replace")[-2000:])
        raise
    finally:
        guest.shutdown()
    assert all(p.poll() is not None for p in guest.procs)
    assert guest.leftovers() == []
