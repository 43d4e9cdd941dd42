"""Host tuning for the packet path, as in the vhost-user PVP write-up: applied, verified
and rolled back exactly.

The run-time half of tuned's ``cpu-partitioning`` profile: every IRQ (and the default for
new ones) and the kernel's unbound workqueues kept off the isolated CPUs, the NMI watchdog
off, THP never, KSM stopped, NUMA balancing off, vmstat updates every 10 s instead of
every second, the ``performance`` governor where cpufreq exists. Each value is saved to
the state file *before* it is changed, so a rollback (or the next kvmlab after a crash)
writes back exactly what was there. The boot-time half (isolcpus, nohz_full, rcu_nocbs,
1G pages) cannot change at run time: it is checked against /proc/cmdline and printed as
the exact fix, as the doctor does.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kvmlab.errors import HostError, KvmlabError, printable
from kvmlab.net.tunepath import STATE_ENV
from kvmlab.net.tunestate import SavedChange, SavedState, State, TuningStateError
from kvmlab.progress import QUIET, Progress
from kvmlab.spec.hostcpus import host_cpu_text
from kvmlab.spec.units import format_cpuset, parse_cpuset

__all__ = ["STATE_ENV", "State", "TuningStateError"]

HOST_ROOT = Path("/")
"""The root tuning is applied and rolled back under (tests point it at a stand-in tree);
a state file applied under another root is refused, never followed."""


class TuningError(KvmlabError):
    """A setting could not be applied or restored."""

    exit_code = 3


@dataclass(frozen=True)
class Setting:
    """One run-time knob: where it lives, what kvmlab wants there, why."""

    name: str
    path: str
    """Relative to the host's root (``proc/sys/kernel/nmi_watchdog``)."""
    wanted: str
    why: str
    irq: int | None = None
    """The IRQ whose affinity this is. The kernel refuses to move an IRQ it manages (a
    device queue's): such an IRQ is judged by the CPUs its interrupts land on (its
    effective affinity), see :func:`apply`."""


def cpu_mask(cpus: Sequence[int]) -> str:
    """A hex mask as the kernel prints cpumask files (``3`` for CPUs 0-1)."""
    return format(sum(1 << c for c in cpus), "x")


def cpu_partitioning(isolated: Sequence[int], root: Path | None = None) -> list[Setting]:
    """The settings that keep the host's own work off ``isolated`` CPUs (under ``root``,
    :data:`HOST_ROOT` by default)."""
    root = HOST_ROOT if root is None else root
    online = parse_cpuset((root / "sys/devices/system/cpu/online").read_text().strip())
    lacking = tuple(c for c in isolated if c not in online)
    if lacking:
        cpus = format_cpuset(lacking)
        raise HostError(f"cannot isolate CPU(s) {cpus}: {host_cpu_text(online)}")
    house = [c for c in online if c not in isolated]
    if not house:
        raise TuningError(
            f"isolating CPUs {format_cpuset(tuple(isolated))} leaves the host no CPU of its own"
        )
    keep = format_cpuset(tuple(house))
    out = [
        Setting(
            "nmi_watchdog",
            "proc/sys/kernel/nmi_watchdog",
            "0",
            "the NMI watchdog interrupts every CPU periodically",
        ),
        Setting(
            "numa_balancing",
            "proc/sys/kernel/numa_balancing",
            "0",
            "NUMA balancing unmaps pages to sample accesses",
        ),
        Setting(
            "vmstat interval",
            "proc/sys/vm/stat_interval",
            "10",
            "vmstat work runs on every CPU each interval",
        ),
        Setting(
            "THP",
            "sys/kernel/mm/transparent_hugepage/enabled",
            "never",
            "khugepaged compaction stalls",
        ),
        Setting("KSM", "sys/kernel/mm/ksm/run", "0", "ksmd scans and merges pages"),
        Setting(
            "workqueue cpumask",
            "sys/devices/virtual/workqueue/cpumask",
            cpu_mask(house),
            "unbound kernel work stays on the host's CPUs",
        ),
        Setting(
            "default IRQ affinity",
            "proc/irq/default_smp_affinity",
            cpu_mask(house),
            "new IRQs start on the host's CPUs",
        ),
    ]
    for irq in sorted(
        (root / "proc/irq").iterdir() if (root / "proc/irq").is_dir() else [],
        key=lambda p: int(p.name) if p.name.isdigit() else -1,
    ):
        if irq.name.isdigit() and (irq / "smp_affinity_list").exists():
            out.append(
                Setting(
                    f"IRQ {irq.name} affinity",
                    f"proc/irq/{irq.name}/smp_affinity_list",
                    keep,
                    "its interrupts stay off the isolated CPUs",
                    irq=int(irq.name),
                )
            )
    for gov in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")):
        out.append(
            Setting(
                f"{gov.parent.parent.name} governor",
                str(gov.relative_to(root)),
                "performance",
                "no frequency ramp-up on bursts",
            )
        )
    return [s for s in out if (root / s.path).exists()]


def _current(root: Path, s: Setting) -> str:
    text = (root / s.path).read_text().strip()
    if "[" in text:  # THP: "always [madvise] never"
        return text.split("[", 1)[1].split("]", 1)[0]
    return text


def _same(path: str, value: str, wanted: str) -> bool:
    if path.endswith(("smp_affinity", "cpumask")):
        return int(value.replace(",", ""), 16) == int(wanted, 16)
    return value == wanted


@dataclass
class Outcome:
    """What an apply, verify or rollback found, setting by setting."""

    done: list[tuple[str, str, str]]
    """(name, before, after)."""
    failed: list[tuple[str, str]]
    """(name, why)."""
    unmovable: list[tuple[str, str]] = field(default_factory=list)
    """(name, why): IRQs the kernel manages and would not move, whose interrupts land on
    host CPUs only, or that the lab accepts (``[tuning] unmovable_irqs = "accept"``)."""
    undone: bool = False
    """A setting failed, so everything this apply changed was written back."""
    kept: list[tuple[str, str]] = field(default_factory=list)
    """(name, why): settings a rollback left alone because they no longer hold what kvmlab
    wrote (someone changed them since): their value now is not kvmlab's to undo."""


Owner = tuple[int, int | None]
"""(pid, start time) of the kvmlab run that applied tuning and will roll it back."""


def apply(
    settings: Sequence[Setting],
    state: State,
    owner: Owner | None = None,
    root: Path | None = None,
    accept_unmovable: bool = False,
) -> Outcome:
    """Change each setting that differs, saving its original first. ``owner``: (pid, start
    time) of a kvmlab run that rolls back itself, or the next kvmlab if it dies (None: an
    explicit ``kvmlab tune apply``, undone by ``kvmlab tune rollback``).

    All or nothing: when a setting fails (an IRQ the kernel will not move whose interrupts
    land on an isolated CPU included, unless ``accept_unmovable``), every value this call
    changed is written back and ``undone`` is set. IRQs the kernel would not move are
    recorded in the state file, so :func:`verify` knows them. ``root``: :data:`HOST_ROOT`
    by default."""
    root = HOST_ROOT if root is None else root
    if state.read() is not None:
        raise TuningError(
            printable(f"tuning is applied already ({state.path}); 'kvmlab tune rollback' first")
        )
    changes: list[SavedChange] = []
    unmovable: list[str] = []
    out = Outcome([], [])

    def save() -> None:
        state.write(SavedState(owner=owner, root=str(root), changes=changes, unmovable=unmovable))

    try:
        _apply_each(settings, state, root, accept_unmovable, out, changes, unmovable, save)
    except BaseException:  # Ctrl-C, SIGTERM (as KeyboardInterrupt), a state write refused
        if changes:  # all or nothing: what this call wrote goes back before it ends
            from kvmlab.proc.signals import deferred_signals

            with deferred_signals():
                back = rollback(state, root)
            if back.failed:
                names = ", ".join(f"{n} ({why})" for n, why in back.failed)
                raise TuningError(
                    printable(
                        f"apply cut short; could not write back {names}: "
                        f"{state.path} keeps them, 'kvmlab tune rollback' retries"
                    )
                ) from None
        raise
    if out.failed and changes:
        back = rollback(state, root)
        out.undone = not back.failed
        if back.failed:  # still applied: say so, never "nothing changed"
            left = {n for n, _ in back.failed}
            out.done = [d for d in out.done if d[0] in left]
            out.failed += [
                (
                    n,
                    f"could not be written back ({why}); {state.path} keeps it "
                    "for 'kvmlab tune rollback'",
                )
                for n, why in back.failed
            ]
    elif out.failed or not (changes or unmovable):
        state.remove()
    return out


def _apply_each(
    settings: Sequence[Setting],
    state: State,
    root: Path,
    accept_unmovable: bool,
    out: Outcome,
    changes: list[SavedChange],
    unmovable: list[str],
    save: Callable[[], None],
) -> None:
    """:func:`apply`'s loop: each setting that differs saved, then written."""
    for s in settings:
        try:
            before = _current(root, s)
        except FileNotFoundError:
            if s.irq is not None:  # an IRQ gone since the list was made: nothing to move
                continue
            out.failed.append((s.name, "is gone"))
            continue
        except OSError as exc:
            out.failed.append((s.name, f"cannot be read ({exc.strerror or exc})"))
            continue
        if _same(s.path, before, s.wanted):
            continue
        if s.irq is not None and not _movable(root, s):
            ok, why = _unmovable(root, s, accept_unmovable)
            (out.unmovable if ok else out.failed).append((s.name, why))
            continue
        try:
            change = SavedChange(name=s.name, path=s.path, original=before, wanted=s.wanted)
        except ValueError:
            out.failed.append((s.name, f"reads {before[:40]!r}, which kvmlab cannot restore"))
            continue
        changes.append(change)
        save()  # the original is on disk before the value changes
        try:
            (root / s.path).write_text(s.wanted + "\n")
        except OSError as exc:
            changes.pop()
            if s.irq is not None and exc.errno in (errno.EIO, errno.EPERM):  # kernel-managed
                ok, why = _unmovable(root, s, accept_unmovable)
                (out.unmovable if ok else out.failed).append((s.name, why))
                if ok:
                    unmovable.append(s.path)
            else:
                out.failed.append((s.name, exc.strerror or str(exc)))
            save()
            continue
        out.done.append((s.name, before, _current(root, s)))


def verify(
    settings: Sequence[Setting],
    root: Path | None = None,
    unmovable: Collection[str] = (),
    accept_unmovable: bool = False,
) -> Outcome:
    """Each setting as it is now against what kvmlab wants there. An IRQ the kernel will
    not move (its affinity file is read-only, or ``unmovable``: the paths an apply found
    refused, the state file's record) passes when its interrupts land on host CPUs only (or
    ``accept_unmovable``); any other IRQ only when it may run on host CPUs only. ``root``:
    :data:`HOST_ROOT` by default."""
    root = HOST_ROOT if root is None else root
    out = Outcome([], [])
    for s in settings:
        try:
            now = _current(root, s)
        except FileNotFoundError:
            if s.irq is not None:  # gone since the list was made
                continue
            raise
        if _same(s.path, now, s.wanted):
            out.done.append((s.name, now, s.wanted))
        elif s.irq is not None and (s.path in unmovable or not _movable(root, s)):
            ok, why = _unmovable(root, s, accept_unmovable)
            (out.unmovable if ok else out.failed).append((s.name, why))
        elif s.irq is not None:
            lands = format_cpuset(_lands_on(root, s.irq))
            why = f"{_irq_label(root, s.irq)} may run on CPUs {now} (wanted {s.wanted})"
            out.failed.append((s.name, f"{why}; its interrupts land on {lands} now"))
        else:
            out.failed.append((s.name, f"is {now}, wanted {s.wanted}"))
    return out


def _movable(root: Path, s: Setting) -> bool:
    """Whether the kernel lets anyone move this IRQ: it makes the affinity file of an IRQ
    it manages read-only (older kernels refuse the write instead, with EIO)."""
    try:
        return bool((root / s.path).stat().st_mode & stat.S_IWUSR)
    except OSError:
        return True


def _lands_on(root: Path, irq: int) -> tuple[int, ...]:
    """The CPUs an IRQ's interrupts are delivered to (its effective affinity, where the
    kernel shows it; else the CPUs it may run on)."""
    base = root / "proc/irq" / str(irq)
    path = base / "effective_affinity_list"
    try:
        text = (path if path.exists() else base / "smp_affinity_list").read_text().strip()
    except FileNotFoundError:  # the IRQ went away meanwhile: it delivers nothing
        return ()
    return parse_cpuset(text) if text else ()


def _irq_label(root: Path, irq: int) -> str:
    """``IRQ 36 (virtio1-req.0)``: the number and the handlers' names /proc/irq shows."""
    try:
        names = sorted(p.name for p in (root / "proc/irq" / str(irq)).iterdir() if p.is_dir())
    except OSError:
        names = []
    shown = printable(",".join(names))
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"IRQ {irq} ({shown})" if shown else f"IRQ {irq}"


def _unmovable(root: Path, s: Setting, accept: bool) -> tuple[bool, str]:
    """Whether an IRQ the kernel will not move is acceptable, and why, in words."""
    assert s.irq is not None
    label = _irq_label(root, s.irq)
    lands = _lands_on(root, s.irq)
    host = set(parse_cpuset(s.wanted))
    on_isolated = tuple(c for c in lands if c not in host)
    if not on_isolated:
        where = format_cpuset(lands)
        return (
            True,
            f"{label}: the kernel manages it and will not move it; it lands on {where}, a host CPU",
        )
    cpus = format_cpuset(on_isolated)
    if accept:
        return True, (
            f"{label}: the kernel manages it and will not move it; it lands on "
            f"isolated CPU {cpus} (accepted: [tuning] unmovable_irqs)"
        )
    return False, (
        f"{label} lands on isolated CPU {cpus} and the kernel will not move it (it manages "
        f"this IRQ); fix: add isolcpus=managed_irq,domain,{cpus} to the kernel command line "
        "and reboot, isolate other CPUs, or accept it (--unmovable-irqs accept, or [tuning] "
        'unmovable_irqs = "accept")'
    )


def rollback(state: State, root: Path | None = None) -> Outcome:
    """Write back every saved original (last changed first) and remove the state file; a
    value that cannot be written back keeps the file, naming it. Only the tunables kvmlab
    knows are written, at their fixed paths under ``root`` (:data:`HOST_ROOT`), never a
    root the file names; nothing is created. A setting is written back only while it
    still holds what kvmlab wrote: one changed since (by an administrator, another tool)
    is left as it is and named with both values in :attr:`Outcome.kept`, as tuned does."""
    root = HOST_ROOT if root is None else root
    data = state.read()
    out = Outcome([], [])
    if data is None:
        return out
    if Path(data.root) != root:
        raise TuningStateError(state.path, f"was applied under root {data.root!r}, not {root}")
    left = []
    for c in reversed(data.changes):
        try:
            now = _current(root, Setting(c.name, c.path, c.wanted, ""))
            if not _same(c.path, now, c.wanted):
                out.kept.append(
                    (
                        c.name,
                        f"is {now}, not the {c.wanted} kvmlab wrote: changed since, so left "
                        f"as it is (kvmlab found {c.original} before tuning)",
                    )
                )
                continue
            _write_back(root / c.path, c.original)
            out.done.append((c.name, c.wanted, c.original))
        except FileNotFoundError:  # an IRQ that went away: nothing left to restore
            out.done.append((c.name, c.wanted, "(gone)"))
        except OSError as exc:
            left.append(c)
            out.failed.append((c.name, exc.strerror or str(exc)))
    if left:
        state.write(data.model_copy(update={"changes": list(reversed(left))}))
    else:
        state.remove()
    return out


def _write_back(path: Path, value: str) -> None:
    """Write ``value`` into an existing file, never through a final link, never creating."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")


BOOT_PARAMS = ("isolcpus", "nohz_full", "rcu_nocbs")


def boot_findings(isolated: Sequence[int], cmdline: str) -> list[tuple[str, str]]:
    """(what is missing, the exact fix) for the boot-time half, from /proc/cmdline."""
    want = format_cpuset(tuple(isolated))
    words = dict(w.split("=", 1) for w in cmdline.split() if "=" in w)
    found = []
    for p in BOOT_PARAMS:
        have = words.get(p, "")
        cpus = have.split(",", 1)[-1] if p == "isolcpus" and "," in have else have
        try:
            covered = set(isolated) <= set(parse_cpuset(cpus)) if cpus else False
        except ValueError:
            covered = False
        if not covered:
            value = f"managed_irq,domain,{want}" if p == "isolcpus" else want  # as tuned does
            found.append(
                (
                    f"{p}={have or '(unset)'} does not cover CPUs {want}",
                    f"add {p}={value} to GRUB_CMDLINE_LINUX in /etc/default/grub, "
                    "then update-grub and reboot",
                )
            )
    if "hugepagesz=1G" not in cmdline and "hugepagesz=1g" not in cmdline:
        found.append(
            (
                "no 1G huge pages reserved at boot (for guest memory on 1G pages)",
                "add default_hugepagesz=1G hugepagesz=1G hugepages=8 to "
                "GRUB_CMDLINE_LINUX, then update-grub and reboot",
            )
        )
    return found


class Toggle:
    """Tuning switched on and off between PVP windows, owned by this kvmlab (a crash leaves
    the state file for the next kvmlab, which rolls it back)."""

    def __init__(
        self,
        settings: Sequence[Setting],
        state: State | None = None,
        accept_unmovable: bool = False,
        report: Progress = QUIET,
    ) -> None:
        self.settings = list(settings)
        self.state = state or State()
        self.accept_unmovable = accept_unmovable
        self.report = report
        """Told once of each IRQ the kernel would not move (the tuned windows' caveat)."""
        self.reported = False
        self.on = False
        if self.state.read() is not None:
            raise TuningError(
                printable(
                    f"tuning is applied already ({self.state.path}): comparing "
                    "needs the untuned host; 'kvmlab tune rollback' first"
                )
            )

    def set(self, on: bool) -> None:
        """Apply (True) or roll back (False); a setting that fails to change is an error.
        Rolling back goes by the state file, so tuning cut short part-way is undone too."""
        from kvmlab.proc.processes import start_time

        if on:
            if self.on:
                return
            self.on = True  # first: an apply cut short still counts as applied
            got = apply(
                self.settings,
                self.state,
                owner=(os.getpid(), start_time(os.getpid())),
                accept_unmovable=self.accept_unmovable,
            )
            if not self.reported and not got.failed:
                self.reported = True
                for _name, why in got.unmovable:
                    self.report.step(f"tuned windows: {why}")
        else:
            if self.state.read() is None:
                self.on = False
                return
            got = rollback(self.state)
            self.on = False
        if got.failed:
            names = ", ".join(f"{n} ({why})" for n, why in got.failed)
            raise TuningError(
                printable(f"tuning could not {'apply' if on else 'roll back'}: {names}")
            )
