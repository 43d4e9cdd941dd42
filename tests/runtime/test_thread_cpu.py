"""Per-thread CPU of a QEMU: ``/proc/PID/task/*/stat`` as recorded from a real TCG QEMU
here, and the guest/kernel/QEMU-user split over a window."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kvmlab.runtime.thread_cpu import (
    ThreadTimes,
    parse_stat,
    parse_stats,
    read_threads,
    role,
    thread_use,
)

DATA = Path(__file__).parent / "data"


def test_recorded_tcg_qemu_threads_parse_with_their_names() -> None:
    threads = parse_stats((DATA / "qemu-tcg-task-stat.txt").read_text(), 100.0)
    names = {t.name for t in threads.values()}
    assert {"qemu-system-x86", "IO mon_iothread", "CPU 0/TCG", "worker"} <= names
    vcpu = next(t for t in threads.values() if t.name == "CPU 0/TCG")
    assert vcpu.user > 0 and vcpu.guest == 0  # TCG: no guest mode, all in QEMU's user time
    assert role(vcpu.name) == "vCPU" and role("IO mon_iothread") == "I/O thread"


def test_a_name_with_parentheses_and_spaces_ends_at_the_last_paren() -> None:
    fields = ["S"] + ["0"] * 10 + ["700", "300"] + ["0"] * 27 + ["500", "0"]
    line = "42 (CPU 1/KVM) (x)) " + " ".join(fields)
    got = parse_stat(line, 100.0)
    assert got == ThreadTimes(42, "CPU 1/KVM) (x)", 7.0, 3.0, 5.0)
    assert parse_stat("not a stat line", 100.0) is None
    assert parse_stat("42 (short) S 1 2 3", 100.0) is None


def test_guest_time_is_taken_out_of_user_time() -> None:
    """A KVM vCPU: utime 7 s of which 5 s in guest mode, stime 3 s, over 10 s."""
    before = {42: ThreadTimes(42, "CPU 0/KVM", 0.0, 0.0, 0.0)}
    after = {
        42: ThreadTimes(42, "CPU 0/KVM", 7.0, 3.0, 5.0),
        43: ThreadTimes(43, "worker", 1.0, 0.0, 0.0),  # born in the window: not counted
    }
    (vcpu,) = thread_use(before, after, 10.0)
    assert (vcpu.guest_pct, vcpu.kernel_pct, vcpu.qemu_user_pct) == (50.0, 30.0, 20.0)
    assert vcpu.total_pct == 100.0 and vcpu.to_json()["role"] == "vCPU"
    assert thread_use(before, after, 0.0) == []


def test_a_busy_thread_of_this_process_is_measured_where_it_runs() -> None:
    """The fault from outside: a thread that spins shows up busiest, in user time."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    worker = threading.Thread(target=spin, name="spinner")
    worker.start()
    try:
        before = read_threads(os.getpid())
        time.sleep(0.5)
        after = read_threads(os.getpid())
    finally:
        stop.set()
        worker.join()
    busiest = thread_use(before, after, 0.5)[0]
    assert busiest.tid == worker.native_id and busiest.total_pct > 0
    assert busiest.guest_pct == 0
