"""The exit profile beside each configuration of the by-configuration table: inside
``kvmlab run``/``bench``, every guest under KVM inside a guest hypervisor profiled for
``[bench] exit_profile`` seconds while a page-table-heavy load runs in it, stored as the
run's ``exits`` rows."""

from __future__ import annotations

import contextlib
import re

from kvmlab.bench.runner import LevelRunner
from kvmlab.bench.session import Observer
from kvmlab.errors import KvmlabError
from kvmlab.exits.collect import profile_guest
from kvmlab.exits.model import Profile
from kvmlab.results.model import Sample
from kvmlab.runtime import backends
from kvmlab.runtime.machine import Machine
from kvmlab.runtime.rundir import GuestRecord, LabDir

WORKLOAD = "exits"
TOP_KINDS = 6
"""Exit kinds (vendor-neutral: ``exception``, ``cr_access``, ``npf``, ...) stored per
profile, most frequent first (the rest are in ``all_per_s``)."""
LOAD_MARGIN_S = 30.0
"""The load's backstop is the window plus this (times the guest's slowness): the tracer,
started inside the guest hypervisor after the load, must find it running; the load is
stopped as soon as the window is taken."""


def load_argv(vcpus: int, seconds: float) -> list[str]:
    """stress-ng's fork stressor on every vCPU for ``seconds`` (the ``fork`` workload's)."""
    return ["stress-ng", "--fork", str(vcpus), "--timeout", f"{max(1, round(seconds))}s", "-q"]


def samples(profile: Profile, variant: str, guest: str, level: str) -> list[Sample]:
    """The profile as the run's rows: exits/s in all, then per kind of exit (the same names
    on AMD-V and VT-x: shadow paging's ``exception`` (#PF), ``cr_access`` (CR3) and
    ``invlpg``; nested paging's ``npf``), most frequent first."""

    def row(metric: str, count: int) -> Sample:
        return Sample(
            variant,
            guest,
            level,
            "kvm",
            WORKLOAD,
            metric,
            profile.rate(count),
            "exits/s",
            False,
            0,
            f"kvmlab exits ({profile.provider}, {profile.seconds:g} s) under stress-ng --fork",
        )

    rows = [row("all_per_s", profile.total)]
    kinds: dict[str, int] = {}
    for reason in profile.reasons:
        kinds[reason.kind] = kinds.get(reason.kind, 0) + reason.count
    for kind, count in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_KINDS]:
        name = re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_") or "other"
        rows.append(row(f"{name}_per_s", count))
    return rows


def exit_profiler(seconds: float) -> Observer:
    """The observer :func:`kvmlab.bench.session.run_bench` calls with each guest hypervisor
    and its guests: each guest under KVM profiled under load, its rows stored."""

    def observe(runner: LevelRunner, hyper: Machine, children: list[GuestRecord]) -> None:
        lab_dir = LabDir.of(hyper.config.lab)
        for child in children:
            if child.accel != "kvm":
                continue
            guest = "/".join(child.address)
            runner.at("L2", guest, WORKLOAD)
            run_dir = lab_dir.guest_dir(child.address)
            machine = backends.attach(run_dir, child)
            # a backstop: it is stopped once the window is taken
            backstop = (seconds + LOAD_MARGIN_S) * max(1.0, machine.level_factor())
            load = machine.exec_background(load_argv(child.vcpus, backstop))
            try:
                profile = profile_guest(run_dir, child, seconds)
            finally:
                with contextlib.suppress(KvmlabError):
                    machine.exec(["kill", "-TERM", str(load)], timeout=60)
            rows = samples(profile, runner.variant, guest, "L2")
            runner.store.add(runner.run_id, rows)
            top = ", ".join(f"{r.metric} {r.value:.0f}" for r in rows[1:4])
            where = f"L2 {runner.shown(guest)}"
            if runner.variant != "default":
                where = f"{runner.variant}: {where}"
            runner.progress(
                f"{where} exits under fork load: "
                f"{rows[0].value:.0f}/s ({top}; {profile.provider}, {profile.seconds:g} s)"
            )

    return observe
