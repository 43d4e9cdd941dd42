"""The ``exits`` workload: every guest under KVM inside a guest hypervisor profiled for
``[bench] exit_profile`` seconds while a page-table-heavy load (the ``fork`` workload's
stressor) runs in it, stored as exits per second, in all and by kind, beside each
configuration of the by-configuration table.

The profiler is the ``exits`` domain's (``kvmlab.exits.collect.profile_guest``), which
``bench`` may not import: the command line hands it in as :data:`PROFILER`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kvmlab.bench import tools
from kvmlab.bench.registry import GuestsUp, GuestsWorkload, Provider, register
from kvmlab.errors import KvmlabError
from kvmlab.results.model import Sample

if TYPE_CHECKING:
    from kvmlab.runtime.rundir import GuestRecord
    from kvmlab.spec import Lab

NAME = "exits"
TOP_KINDS = 6
"""Exit kinds (vendor-neutral: ``exception``, ``cr_access``, ``npf``, ...) stored per
profile, most frequent first (the rest are in ``all_per_s``)."""
LOAD_MARGIN_S = 30.0
"""The load's backstop is the window plus this (times the guest's slowness): the tracer,
started inside the guest hypervisor after the load, must find it running; the load is
stopped as soon as the window is taken."""


class Reason(Protocol):
    """One exit reason of a profile (``kvmlab.exits.model.ReasonStat``)."""

    @property
    def kind(self) -> str: ...

    @property
    def count(self) -> int: ...


class ExitProfile(Protocol):
    """A guest's exits over a window (``kvmlab.exits.model.Profile``)."""

    @property
    def provider(self) -> str: ...

    @property
    def seconds(self) -> float: ...

    @property
    def reasons(self) -> Sequence[Reason]: ...

    @property
    def total(self) -> int: ...

    def rate(self, count: int) -> float: ...


PROFILER: Provider[Callable[[Path, GuestRecord, float], ExitProfile]] = Provider(
    "the exit profiler"
)
"""``profile_guest(run_dir, record, seconds)``."""


def load_argv(vcpus: int, seconds: float) -> list[str]:
    """The ``fork`` workload's stressor on every vCPU for ``seconds``, quietly."""
    return [*tools.fork_stressor(vcpus, seconds), "-q"]


def samples(profile: ExitProfile, variant: str, guest: str, level: str) -> list[Sample]:
    """The profile as the run's rows: exits/s in all, then per kind of exit (the same names
    on AMD-V and VT-x: shadow paging's ``exception`` (#PF), ``cr_access`` (CR3) and
    ``invlpg``; nested paging's ``npf``), most frequent first."""

    def row(metric: str, count: int) -> Sample:
        return Sample(
            variant,
            guest,
            level,
            "kvm",
            NAME,
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


def run(up: GuestsUp) -> None:
    """Each guest under KVM profiled under load, its rows stored."""
    from kvmlab.runtime import backends
    from kvmlab.runtime.rundir import LabDir

    seconds = up.lab.lab.bench.exit_profile
    profile_guest = up.provided(PROFILER)
    lab_dir = LabDir.of(up.hypervisor.config.lab)
    for child in up.guests:
        if child.accel != "kvm":
            continue
        guest = "/".join(child.address)
        up.at("L2", guest, NAME)
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
        rows = samples(profile, up.variant, guest, "L2")
        up.add(rows)
        top = ", ".join(f"{r.metric} {r.value:.0f}" for r in rows[1:4])
        where = f"L2 {up.shown(guest)}"
        if up.variant != "default":
            where = f"{up.variant}: {where}"
        up.progress.step(
            f"{where} exits under fork load: "
            f"{rows[0].value:.0f}/s ({top}; {profile.provider}, {profile.seconds:g} s)"
        )


def wanted(lab: Lab) -> bool:
    return bool(lab.bench.exit_profile)


register(GuestsWorkload(NAME, order=80, wanted=wanted, run=run))
