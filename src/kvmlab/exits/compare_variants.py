"""``kvmlab exits LAB --compare``: the lab as written and each variant brought up in turn,
one guest profiled the same way in each, the profiles side by side (the check of a fix).

Everything is checked before the first variant boots (:func:`variants_to_compare`); then
:func:`profile_variants` brings each up and down as ``kvmlab up`` and ``down`` do (guests
detached, reached through their records), so each profile is taken exactly as ``kvmlab
exits`` takes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.errors import RuntimeFailure, UsageError, printable

if TYPE_CHECKING:
    from kvmlab.exits.collect import Provider
    from kvmlab.exits.model import Profile
    from kvmlab.runtime.lab import Launch
    from kvmlab.spec import Guest, LoadedLab

Guard = Callable[[str], AbstractContextManager[None]]
"""What each variant's bring-up, profile and teardown runs inside, told what it does
(the command line's: Ctrl-C ends it after the clean-up)."""


@dataclass(frozen=True)
class Variants:
    """The configurations compared, by name, and the profiled guest in each."""

    labs: dict[str, LoadedLab]
    guests: dict[str, Guest]


def variants_to_compare(
    loaded: LoadedLab, lab_path: Path, guest: str, chosen: Sequence[str] = ()
) -> Variants:
    """The variants of ``loaded`` to compare (``chosen``: those, else the lab as written
    and every variant), each checked to have ``guest`` and to run on this host's KVM; a
    :class:`UsageError` for the first that cannot be compared."""
    from kvmlab.runtime.guest_kvm import check_host_kvm

    if loaded.lab.find(guest) is None:
        known = ", ".join("/".join(path) for path, _ in loaded.lab.walk())
        raise UsageError(
            f"lab {loaded.lab.name} has no guest {printable(repr(guest))} "
            f"(its guests: {known}; --guest is a path like l1/l2)"
        )
    variants = loaded.variants(chosen)
    if len(variants) < 2:
        raise UsageError(
            f"{printable(str(lab_path))}: nothing to compare "
            + (
                "(name two or more with --variant)"
                if chosen
                else "(kvmlab diagnose --apply writes a variant)"
            )
        )
    guests: dict[str, Guest] = {}
    for name, variant in variants.items():
        check_host_kvm(variant)  # every variant this host's KVM cannot run, before any boots
        found = variant.lab.find(guest)
        if found is None:
            raise UsageError(f"variant {name} of lab {loaded.lab.name} has no guest {guest}")
        guests[name] = found
    return Variants(variants, guests)


@dataclass(frozen=True)
class Window:
    """How each variant's guest is profiled: idle ``settle`` seconds after it is up, then
    ``seconds`` with ``provider``."""

    seconds: float
    settle: float
    provider: Provider = "auto"


def profile_variants(
    lab: str,
    variants: Variants,
    guest: str,
    window: Window,
    launch: Launch,
    guard: Guard = lambda what: nullcontext(),
) -> dict[str, Profile]:
    """Bring each variant of lab ``lab`` up with ``launch``, profile ``guest`` in it, bring
    it down; the profiles by variant. ``launch.progress`` hears each variant's stages
    prefixed by its name."""
    profiles: dict[str, Profile] = {}
    for name, variant in variants.labs.items():
        told = replace(launch, progress=launch.progress.prefixed(f"{name}: "))
        with guard(f"comparing variant {name} of {lab}"):
            profiles[name] = _profile_one(lab, name, variant, guest, window, told)
    return profiles


def _profile_one(
    lab: str,
    name: str,
    variant: LoadedLab,
    guest: str,
    window: Window,
    launch: Launch,
) -> Profile:
    from kvmlab.exits.collect import profile_guest
    from kvmlab.runtime import lab as labrun
    from kvmlab.runtime.rundir import LabDir

    progress = launch.progress
    labrun.up(variant, launch)
    try:
        progress.step(f"up; settling for {window.settle:g} s, then {window.seconds:g} s")
        time.sleep(window.settle)
        entry = next(
            (
                e
                for e in LabDir.of(lab).entries()
                if "/".join(e.address) == guest and e.record is not None
            ),
            None,
        )
        if entry is None or entry.record is None:
            raise RuntimeFailure(
                f"variant {name}: guest {guest} is not running after 'kvmlab up' of lab {lab}"
            )
        return profile_guest(entry.run_dir, entry.record, window.seconds, window.provider)
    finally:
        labrun.down(lab, progress=progress)
