"""What a failure inside a guest hypervisor tells the user (no guest needed)."""

from __future__ import annotations

import signal

from kvmlab.guest.agent import ExecResult
from kvmlab.runtime.machine import describe_status
from kvmlab.runtime.nested import inner_failure

# What an inner `kvmlab up` printed when it failed (asyncio noise included, as recorded once).
STDERR = b"""accelerator for accel=auto: kvm (/dev/kvm is usable and kvm_amd is hardware KVM)
  starting nested/l2 (kvm: accel auto -> kvm)
Exception ignored in: <coroutine object AsyncProtocol._bh_loop_forever at 0x7f0a86af2ac0>
RuntimeError: no running event loop
kvmlab: nested/l2: QEMU exited while booting
kvmlab:   exit code: 1
"""


def test_inner_failure_keeps_the_inner_kvmlab_error_lines() -> None:
    failure = inner_failure(ExecResult(3, b"", STDERR), ["kvmlab", "up"], "nested/l1: failed")
    assert failure.what == (
        "nested/l1: failed inside the guest: nested/l2: QEMU exited while booting"
    )
    assert failure.returncode == 3
    assert failure.log_tail == [
        "kvmlab: nested/l2: QEMU exited while booting",
        "kvmlab:   exit code: 1",
    ]


def test_inner_failure_without_kvmlab_lines_keeps_the_tail() -> None:
    out = "\n".join(f"line {i}" for i in range(40)).encode()
    failure = inner_failure(ExecResult(1, out, b""), ["sh"], "x")
    assert failure.log_tail == [f"line {i}" for i in range(25, 40)]


def test_exit_status_in_words() -> None:
    assert describe_status(0) == "exit code 0"
    assert describe_status(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert describe_status(-99) == "killed by signal 99"
