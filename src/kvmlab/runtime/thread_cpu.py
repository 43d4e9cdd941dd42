"""Where a QEMU's host CPU goes, thread by thread: guest mode, the host kernel (exits, KVM,
I/O) and QEMU's own user space (emulation, its main loop): the first look the idle-guest
exit-storm write-up takes.

Linux counts a thread's time in guest mode (``guest_time``, field 43 of
``/proc/PID/task/TID/stat``) inside its user time (field 14), so QEMU's own user-space time
is user minus guest; kernel time is ``stime`` (field 15). A KVM vCPU thread's guest time is
its guest running; under TCG there is no guest mode, and the guest's time is QEMU's user
time of its vCPU threads.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import ProcessFailure
from kvmlab.jsondoc import opened
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.nested import guest_env, inner_failure, kvmlab_argv

VCPU = re.compile(r"^CPU (\d+)/(KVM|TCG|HVF|WHPX)$")
"""A vCPU thread's name with ``-name ...,debug-threads=on``."""


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's cumulative CPU seconds."""

    tid: int
    name: str
    user: float
    system: float
    guest: float


@dataclass(frozen=True)
class ThreadUse:
    """One thread's CPU over a window, in % of one CPU."""

    tid: int
    name: str
    role: str
    guest_pct: float
    kernel_pct: float
    qemu_user_pct: float

    @property
    def total_pct(self) -> float:
        """All of it, as ``top -H`` shows it."""
        return self.guest_pct + self.kernel_pct + self.qemu_user_pct

    def to_json(self) -> dict[str, object]:
        """The thread as ``-o json`` prints it."""
        return {
            "tid": self.tid,
            "name": self.name,
            "role": self.role,
            "guest_pct": round(self.guest_pct, 1),
            "kernel_pct": round(self.kernel_pct, 1),
            "qemu_user_pct": round(self.qemu_user_pct, 1),
            "total_pct": round(self.total_pct, 1),
        }


def role(name: str) -> str:
    """What a QEMU thread does, by its name."""
    if VCPU.match(name):
        return "vCPU"
    if name.startswith("qemu-system") or name.startswith("qemu-kvm"):
        return "main loop"
    if name.startswith("IO ") or name.startswith("iothread"):
        return "I/O thread"
    if name.startswith("vhost-"):
        return "vhost (kernel)"
    if name == "worker" or name.startswith("pool-"):
        return "worker"
    return "other"


def parse_stat(line: str, hz: float) -> ThreadTimes | None:
    """One ``/proc/PID/task/TID/stat`` line; ``None`` if it is not one. The name sits in
    parentheses and may itself hold spaces and parentheses: it ends at the last ``)``."""
    head, paren, rest = line.rpartition(")")
    tid_text, _, name = head.partition(" (")
    fields = rest.split()
    if not paren or not tid_text.strip().isdigit() or len(fields) < 41:
        return None
    try:
        user, system, guest = (int(fields[i]) / hz for i in (11, 12, 40))
    except ValueError:
        return None
    return ThreadTimes(int(tid_text), name, user, system, guest)


def parse_stats(text: str, hz: float) -> dict[int, ThreadTimes]:
    """Every thread of ``cat /proc/PID/task/*/stat`` (lines that are not one are skipped)."""
    times = (parse_stat(line, hz) for line in text.splitlines())
    return {t.tid: t for t in times if t is not None}


def read_threads(pid: int) -> dict[int, ThreadTimes]:
    """The threads of ``pid`` on this host (none when it has exited)."""
    lines = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            lines.append((task / "stat").read_text())
        except OSError:
            continue  # a thread that ended meanwhile
    return parse_stats("".join(lines), float(os.sysconf("SC_CLK_TCK")))


def thread_use(
    before: dict[int, ThreadTimes], after: dict[int, ThreadTimes], seconds: float
) -> list[ThreadUse]:
    """Each thread that lived through the window, busiest first."""
    if seconds <= 0:
        return []
    used = []
    for tid, end in after.items():
        start = before.get(tid)
        if start is None:
            continue
        guest = max(0.0, end.guest - start.guest)
        user = max(0.0, end.user - start.user - guest)  # guest time is inside user time
        kernel = max(0.0, end.system - start.system)
        used.append(
            ThreadUse(
                tid,
                end.name,
                role(end.name),
                100 * guest / seconds,
                100 * kernel / seconds,
                100 * user / seconds,
            )
        )
    return sorted(used, key=lambda u: (-u.total_pct, u.tid))


@dataclass
class Threads:
    """A guest's QEMU threads over a window, measured where that QEMU runs."""

    where: str
    """``this host``, or ``inside LAB/GUEST`` (the guest hypervisor running it)."""
    threads: list[dict[str, object]]
    """:meth:`ThreadUse.to_json` of each, busiest first."""
    problem: str | None = None
    """Why they could not be measured."""


def threads_inside(hyper: Machine) -> dict[str, list[dict[str, object]]]:
    """The threads of every guest the kvmlab inside ``hyper`` runs, by its inner address
    (``kvmlab ps --threads -o json`` there: that QEMU's threads are that guest's); a
    :class:`KvmlabError` saying why when that kvmlab does not answer with them."""
    argv = kvmlab_argv("ps", "--threads", "-o", "json")
    result = hyper.exec(argv, timeout=600, env=guest_env())
    if result.returncode != 0:
        raise inner_failure(result, argv, "kvmlab ps --threads")
    try:
        rows = opened(json.loads(result.stdout), "ps")["guests"]
        return {str(row["address"]): list(row.get("threads") or []) for row in rows}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProcessFailure(
            f"kvmlab ps --threads inside answered no table ({exc})", argv, result.returncode
        ) from None
