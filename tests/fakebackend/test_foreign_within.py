"""``kvmlab exits pid:N --within LAB/GUEST``: the kvmlab inside the guest hypervisor is
asked for the profile of a QEMU kvmlab did not start there, and its answer (here: that
QEMU runs under TCG and has no VM exits) comes back as the same refusal, naming where."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.exits.collect import NoExits
from kvmlab.exits.foreign import profile_within
from kvmlab.runtime import lab as labrun
from tests.fakebackend.conftest import StubLabs


def test_a_pid_inside_a_guest_hypervisor_is_asked_of_the_kvmlab_there(
    stub_labs: StubLabs,
) -> None:
    loaded = stub_labs.lab("host", {"l1": {}})
    [l1] = labrun.up(loaded, stub_labs.launch())
    # a stub guest runs its commands on this host: the "QEMU inside it" is started here
    qemu = subprocess.Popen(
        [
            "bash",
            "-c",
            "exec -a qemu-system-x86_64 /usr/bin/python3 -c 'import time; time.sleep(60)' "
            "-name guest=inner -accel tcg",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{qemu.pid}/cmdline").read_bytes().startswith(b"qemu"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(NoExits, match=r"host/l1: profiling pid:\d+ inside the guest: pid"):
            profile_within(l1, "host/l1", f"pid:{qemu.pid}", 1.0)
        with pytest.raises(UsageError, match="takes pid:N"):
            profile_within(l1, "host/l1", "domain:x", 1.0)
        assert qemu.poll() is None  # untouched
    finally:
        qemu.kill()
        qemu.wait()
        labrun.down("host")
