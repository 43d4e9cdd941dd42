"""``kvmlab bench``: the suite at L0 and in the lab's guests, then the lab's own workloads,
stored as one run; every workload run through its registration (:mod:`kvmlab.bench.registry`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvmlab import __version__
from kvmlab.bench.executor import GuestExecutor, HostExecutor, Place
from kvmlab.bench.registry import (
    GuestsUp,
    GuestsWorkload,
    LabRun,
    LabWorkload,
    LevelWorkload,
    Provided,
    Settings,
    guests_workloads,
    named,
)
from kvmlab.bench.runner import NOTHING, LevelRunner, WorkloadsSkipped
from kvmlab.errors import HostError, KvmlabError, UsageError
from kvmlab.guest.image import GuestImage
from kvmlab.progress import Progress
from kvmlab.results.model import KVM_UNDER_FACT, LEVELS, NOT_RUN_FACT, Run
from kvmlab.results.store import ResultStore
from kvmlab.runtime import backends
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.guest_disks import scratch_device
from kvmlab.runtime.guest_kvm import describe as describe_kvm
from kvmlab.runtime.guest_kvm import host_kvm_unmet, local_kvm
from kvmlab.runtime.guest_network import SLIRP_HOST, user_net
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord, LabDir
from kvmlab.spec import Guest, LoadedLab

SCRATCH_PARENT = Path("/var/tmp")
"""Where L0's fio file lives: on disk (O_DIRECT), not a tmpfs."""


def host_place(scratch: Path) -> Place:
    """The host as a level."""
    return Place("host", "L0", "native", os.cpu_count() or 1, str(scratch), "127.0.0.1")


def guest_place(lab: str, path: tuple[str, ...], guest: Guest, accel: str) -> Place:
    """A guest as a level: its first disk as the fio target, slirp's host as its parent."""
    disk = scratch_device(guest) if guest.boot == "image" else None
    parent = SLIRP_HOST if user_net(lab, path, guest) is not None else None
    level = f"L{len(path)}"
    return Place(
        "/".join(path), level, accel, guest.vcpus, disk, parent, tools=not guest.migratable
    )


def _guest_executor(loaded: LoadedLab, machine: Machine) -> GuestExecutor:
    path = machine.config.address
    guest = loaded.lab.find("/".join(path))
    assert guest is not None
    place = guest_place(loaded.lab.name, path, guest, machine.config.accel)
    return GuestExecutor(place, machine)


def unmeasurable(loaded: LoadedLab, settings: Settings, levels: set[str]) -> list[str]:
    """Each workload of the suite that a guest at a level asked for could not run, with
    why (known from the spec, so refused before anything starts): every variant measured."""
    level = [w for w in map(named, settings.workloads) if isinstance(w, LevelWorkload)]
    out: list[str] = []
    for name, variant in loaded.variants(settings.variants).items():
        for path, guest in variant.lab.walk():
            if f"L{len(path)}" not in levels:
                continue
            place = guest_place(variant.lab.name, path, guest, "tcg")
            lost = [w for w in level if w.unmet(place) or not w.steps(place, settings)]
            if lost:
                where = f"{variant.lab.name}/{'/'.join(path)}"
                shown = where if name == "default" else f"variant {name}: {where}"
                out.append(
                    f"{shown} (L{len(path)}) cannot run {', '.join(w.name for w in lost)}: "
                    f"{lost[0].unmet(place) or NOTHING}"
                )
    return out


def check_measurable(loaded: LoadedLab, settings: Settings, levels: set[str]) -> None:
    """Refuse (:class:`UsageError`) a suite some guest asked for cannot run, with the fix."""
    lost = unmeasurable(loaded, settings, levels)
    if not lost:
        return
    fixes = ["--only to measure what every guest can run"]
    if loaded.lab.variants and not settings.variants:
        fixes.append("--variant NAME to measure just some variants (default: the lab as written)")
    raise UsageError(
        f"{loaded.path}: {'; '.join(lost)}; nothing was started ({'; or '.join(fixes)})"
    )


def lab_levels(loaded: LoadedLab) -> set[str]:
    """The levels every variant of the lab can be measured at: L0 (the host), L1 (its
    guests) and L2 when a guest hypervisor holds guests."""
    levels = {"L0", "L1"}
    if all(any(len(p) == 2 for p, _ in v.lab.walk()) for v in loaded.variants().values()):
        levels.add("L2")
    return levels


def parse_levels(text: str, loaded: LoadedLab) -> set[str]:
    """``--levels L0,L2``, checked against :data:`LEVELS` and against what the lab has."""
    wanted = {lv.strip().upper() for lv in text.split(",") if lv.strip()}
    if not wanted or not wanted <= set(LEVELS):
        raise UsageError(f"--levels takes a list of {', '.join(LEVELS)}, got {text!r}")
    check_levels(loaded, wanted)
    return wanted


def check_levels(loaded: LoadedLab, levels: set[str]) -> None:
    """Refuse (:class:`UsageError`) levels the lab cannot provide, naming what it has."""
    missing = sorted(levels - lab_levels(loaded))
    if not missing:
        return
    has = ", ".join(f"L{len(p)} {'/'.join(p)}" for p, _ in loaded.lab.walk())
    every = " in every variant" if loaded.lab.variants else ""
    usable = ",".join(sorted(lab_levels(loaded)))
    raise UsageError(
        f"lab {loaded.lab.name} ({loaded.path}) cannot be measured at {', '.join(missing)}: "
        f"L2 needs a guest hypervisor (nested = true) holding guests of its own{every}; "
        f"the lab has {has}; it can be measured at --levels {usable}"
    )


def _runnable(
    loaded: LoadedLab, settings: Settings, progress: Progress
) -> tuple[dict[str, LoadedLab], dict[str, str]]:
    """The variants to measure, and every other configuration of the lab with why it is
    not (stored with the run, so its tables show the whole matrix): those this host's KVM
    cannot run (``host_kvm``: said, and left out; named with ``--variant``, or all of
    them, a :class:`HostError` before anything starts) and those not asked for."""
    chosen = loaded.variants(settings.variants)
    have = local_kvm()
    not_run: dict[str, str] = {}
    for name, variant in loaded.variants().items():
        kvm = variant.lab.host_kvm
        why = host_kvm_unmet(kvm, have) if kvm is not None else None
        if why is not None:
            if settings.variants and name in chosen:
                raise HostError(f"{loaded.path}: variant {name} cannot run here: host_kvm {why}")
            not_run[name] = f"host_kvm {why}"
            if name in chosen:
                progress.step(f"variant {name} not run: host_kvm {why}")
        elif name not in chosen:
            not_run[name] = "not asked for (--variant)"
    runnable = {n: v for n, v in chosen.items() if n not in not_run}
    if not runnable:
        reasons = "; ".join(f"{n}: {why}" for n, why in not_run.items() if n in chosen)
        raise HostError(f"{loaded.path}: no configuration of it can run here ({reasons})")
    return runnable, not_run


def run_bench(
    loaded: LoadedLab,
    settings: Settings,
    levels: set[str],
    store: ResultStore,
    launch: labrun.Launch,
    host_facts: dict[str, Any],
    timings: dict[str, float] | None = None,
    *,
    on_start: Callable[[int], None] | None = None,
    lab_workloads: Sequence[LabWorkload] = (),
    provided: Provided | None = None,
    faults: list[KvmlabError] | None = None,
) -> int:
    """Measure the suite at the requested levels, for every variant; the stored run's id.

    ``launch.progress`` hears of each stage (a guest booting, booted, a workload done) and,
    as detail, of each repetition; ``timings`` (when given) receives the
    wall seconds of each boot and workload; ``on_start`` the run's id once it is stored.

    L0 is measured once and filed under every variant (the host does not change
    between them). ``lab_workloads`` (:func:`kvmlab.bench.plan.plan`) run once per variant
    after its suite, with the lab down (they bring it up themselves); the
    :class:`GuestsWorkload` s the lab asks for once per guest hypervisor after its guests'
    workloads, with them still up (their exit profiles); a suite without workloads boots
    nothing for it. ``provided`` holds what workloads need from domains ``bench`` may not
    import; ``faults`` receives the errors the command ends with after its report (what a
    lab workload found wrong). Samples are stored as they are measured; the run is marked
    complete only if everything finished. A failure or Ctrl-C is stored with the level,
    guest and stage it cut short (teardown already done), then raised as it was.
    Nothing is measured or stored when the lab is up already or lacks a level asked for.
    ``launch.backend`` runs the guests (kvmlab's own QEMU, or a libvirtd).
    """
    progress = launch.progress
    labrun.assert_not_up(loaded.lab.name)
    check_levels(loaded, levels)
    check_measurable(loaded, settings, levels)
    variants, not_run = _runnable(loaded, settings, progress)
    run = Run(
        0,
        loaded.lab.name,
        str(loaded.path),
        loaded.digest,
        settings.suite,
        __version__,
        time.time(),
        host={**host_facts, **{f"{NOT_RUN_FACT}{name}": why for name, why in not_run.items()}},
    )
    run_id = store.start(run)
    if on_start is not None:
        on_start(run_id)
    provided = provided if provided is not None else Provided()
    profiles = [w for w in guests_workloads() if w.wanted(loaded.lab)]
    found: dict[str, list[str]] = {w.name: [] for w in lab_workloads}
    runner = LevelRunner(
        store,
        run_id,
        next(iter(variants)),
        settings,
        progress,
        timings if timings is not None else {},
        loaded.lab.name,
    )
    complete = False
    scratch = Path(tempfile.mkdtemp(prefix="kvmlab-fio-", dir=SCRATCH_PARENT))
    try:
        host_exec = HostExecutor(host_place(scratch))
        host_samples = runner.workloads(host_exec, host_exec) if "L0" in levels else []
        for name in variants:
            if name != runner.variant:
                store.add(run_id, [replace(s, variant=name) for s in host_samples])
        guests = bool(levels & {"L1", "L2"} and settings.workloads)
        if guests and settings.interleave and len(variants) > 1:
            _interleaved(
                variants, levels, runner, launch, host_exec, _Up(loaded, profiles, provided)
            )
        for name, variant in variants.items():
            runner.variant = name
            if guests and not (settings.interleave and len(variants) > 1):
                up = _Up(loaded, profiles, provided)
                _guests(variant, levels, runner, launch, host_exec, up)
            for w in lab_workloads:
                found[w.name] += _lab_workload(w, variant, levels, runner, launch, provided)
        if faults is not None:
            faults += [
                w.fault(run_id, found[w.name]) for w in lab_workloads if w.fault and found[w.name]
            ]
        if runner.skipped:
            raise WorkloadsSkipped(runner.skipped)
        complete = True
    except WorkloadsSkipped:
        raise  # each skip is stored already, with its reason on its row
    except BaseException as exc:
        runner.fail(exc)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        store.finish(run_id, complete)
    return run_id


def _lab_workload(
    w: LabWorkload,
    variant: LoadedLab,
    levels: set[str],
    runner: LevelRunner,
    launch: labrun.Launch,
    provided: Provided,
) -> list[str]:
    """One of the lab's own workloads on a variant, its time noted; what it found wrong."""
    start = time.monotonic()
    settings = runner.settings
    found = w.run(
        LabRun(
            variant,
            runner.variant,
            set(levels),
            settings.repetitions,
            launch,
            runner.at,
            runner.store,
            runner.run_id,
            provided,
        )
    )
    shown = "" if runner.variant == "default" else f"{runner.variant} "
    runner.timings[f"{shown}{w.name}"] = time.monotonic() - start
    return found


@dataclass(frozen=True)
class _Up:
    """What runs on a guest hypervisor's guests while they are up: the lab as written (which
    chose it), its :class:`GuestsWorkload` s, and what they were handed."""

    lab: LoadedLab
    workloads: list[GuestsWorkload]
    provided: Provided

    def run(self, runner: LevelRunner, hypervisor: Machine, guests: list[GuestRecord]) -> None:
        for w in self.workloads:
            w.run(
                GuestsUp(
                    self.lab,
                    runner.variant,
                    hypervisor,
                    guests,
                    self.provided,
                    lambda rows: runner.store.add(runner.run_id, rows),
                    runner.at,
                    runner.progress,
                    runner.shown,
                )
            )


def _interleaved(
    variants: dict[str, LoadedLab],
    levels: set[str],
    runner: LevelRunner,
    launch: labrun.Launch,
    host_exec: HostExecutor,
    up: _Up,
) -> None:
    """The configurations' repetitions in rounds, A B A B ...: each round boots each
    configuration afresh and runs its workloads once (after the suite's warm-up), so a
    drift of the host falls on all of them alike; the guests' exit profiles are taken in
    the last round."""
    settings = runner.settings
    rounds = settings.repetitions
    runner.settings = replace(settings, repetitions=1)
    runner.store.add_host_facts(
        runner.run_id,
        {"repetition_order": f"interleaved: {' '.join(variants)}, {rounds} rounds"},
    )
    try:
        for round_ in range(rounds):
            runner.rep_offset = round_
            for name, variant in variants.items():
                runner.variant = name
                runner.progress.step(f"round {round_ + 1}/{rounds}: {name}")
                last = round_ == rounds - 1
                this = up if last else _Up(up.lab, [], up.provided)
                _guests(variant, levels, runner, launch, host_exec, this)
    finally:
        runner.settings, runner.rep_offset = settings, 0


def _guests(
    loaded: LoadedLab,
    levels: set[str],
    runner: LevelRunner,
    launch: labrun.Launch,
    host_exec: HostExecutor,
    up: _Up,
) -> None:
    """Boot L1, measure it, then start the L2s inside and measure them; tear down.

    L2s start only after L1 was measured, so an idle L2 (costly under TCG) does not
    disturb L1's figures, and not at all when L2 is not asked for. An error is stored
    before the teardown, so a teardown failing after it cannot hide it.
    """
    image, progress = launch.image, launch.progress
    tops = ", ".join(loaded.lab.guests)
    runner.at("L1", tops, "boot")
    start = time.monotonic()
    with labrun.started(loaded, launch, start_inner=False) as machines:
        try:
            runner.timings[f"boot {loaded.lab.name} L1"] = time.monotonic() - start
            for machine in machines:
                _measure(loaded, levels, runner, image, host_exec, progress, machine, up)
        except BaseException as exc:
            runner.fail(exc)
            raise
        finally:
            runner.at("L1", tops, "teardown")
            progress.step(f"stopping {runner.shown(tops)}")
            start = time.monotonic()
    progress.step(f"stopped {runner.shown(tops)} ({time.monotonic() - start:.1f} s)")


def _record_kvm(runner: LevelRunner, address: Sequence[str], under: dict[str, str]) -> None:
    """Store, with the run's host facts, the KVM a measured guest ran under (its
    hypervisor's parameters as read back there: the nested-paging talk's paging mode per
    level)."""
    if not under:
        return
    where = runner.shown("/".join(address))
    shown = "" if runner.variant == "default" else f" ({runner.variant})"
    key = f"{KVM_UNDER_FACT}{where}{shown}"
    runner.store.add_host_facts(runner.run_id, {key: describe_kvm(under)})


def _measure(
    loaded: LoadedLab,
    levels: set[str],
    runner: LevelRunner,
    image: Callable[[], GuestImage],
    host_exec: HostExecutor,
    progress: Progress,
    machine: Machine,
    up: _Up,
) -> None:
    """One guest hypervisor (or plain guest) at L1, then the guests it holds at L2."""
    executor = _guest_executor(loaded, machine)
    _record_kvm(runner, machine.config.address, machine.config.under_kvm)  # L2's axis too
    if "L1" in levels:
        runner.boot(executor, machine.boot)
        runner.workloads(executor, host_exec)
    if "L2" not in levels or not machine.config.children:
        return
    l1 = "/".join(machine.config.address)
    inner_guests = loaded.lab.find(l1)
    assert inner_guests is not None
    runner.at("L2", ", ".join(f"{l1}/{name}" for name in inner_guests.guests), "boot")
    start = time.monotonic()
    built = image() if machine.config.boots_image else None
    children = labrun.start_nested(machine, loaded, built, progress)
    runner.timings[f"boot {machine.config.name}'s L2"] = time.monotonic() - start
    runner.store.add_host_facts(
        runner.run_id,
        {f"accelerator_reason {'/'.join(child.address)}": child.accel_reason for child in children},
    )
    lab_dir = LabDir.of(loaded.lab.name)
    for child in children:
        inner = _guest_executor(loaded, backends.attach(lab_dir.guest_dir(child.address), child))
        runner.at("L2", inner.place.guest, "boot")
        runner.boot(inner, inner.machine.boot, say=False)  # start_nested said it
        _record_kvm(runner, tuple(child.address), child.under_kvm)
        runner.workloads(inner, executor)
    up.run(runner, machine, children)
