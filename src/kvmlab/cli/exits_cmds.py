"""``kvmlab exits``: the VM-exit profile of a running guest, an imported perf report, or
one guest's profiles in each variant of a lab side by side (``--compare``)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kvmlab.cli.lab_cmds import find_guest, image_factory, interruptible
from kvmlab.cli.options import output_choice
from kvmlab.errors import UsageError, printable
from kvmlab.exits.foreign import is_foreign

if TYPE_CHECKING:
    from kvmlab.exits.hostprof import HostProfile
    from kvmlab.exits.model import Profile

PROVIDERS = ("auto", "tracepoints", "counters", "perf")
DEFAULT_SECONDS = 10.0
LIVE_SECONDS = (0.1, 3600.0)
"""A window on a running guest: long enough to see exits, short enough to wait for."""
IMPORT_SECONDS = (0.001, 1e6)
"""The window an imported perf report covered (perf kvm stat live: 1 s by default)."""


def check_provider(value: str) -> str:
    """The ``--provider`` value, checked (a bad one is a usage error naming the option)."""
    if value not in PROVIDERS:
        listed = f"{', '.join(PROVIDERS[:-1])} or {PROVIDERS[-1]}"
        raise typer.BadParameter(f"choose {listed} (got {value!r})", param_hint="--provider")
    return value


def check_seconds(seconds: float, limits: tuple[float, float], flag: str = "--seconds") -> float:
    """``seconds`` when finite and within ``limits``, else a :class:`UsageError`."""
    low, high = limits
    if not (math.isfinite(seconds) and low <= seconds <= high):
        raise UsageError(f"{flag} must be between {low:g} and {high:g}, not {seconds:g}")
    return seconds


def refuse_with(option: str, given: Mapping[str, bool]) -> None:
    """Refuse the options in ``given`` that were given alongside ``option``."""
    extra = [name for name, present in given.items() if present]
    if extra:
        raise UsageError(f"{option} takes no {' or '.join(extra)}")


@dataclass(frozen=True)
class ExitsCommand:
    """``kvmlab exits``'s options as typed, by name; :meth:`run` does what they ask: a
    running guest's exit profile, its QEMU's host profile (``host_profile``), an imported
    perf report (``import_``) or a lab's variants compared (``compare``)."""

    address: str | None = None
    seconds: float | None = None
    provider: str = "auto"
    live: bool = False
    output: str = "text"
    host_side_only: bool = False
    compare: bool = False
    guest: str | None = None
    settle: float | None = None
    variant: list[str] | None = None
    import_: Path | None = None
    host_profile: bool = False
    connect: str | None = None
    within: str | None = None

    def run(self) -> None:
        output = output_choice(self.output, "text", "json")
        provider = check_provider(self.provider)
        if self.address is not None and is_foreign(self.address):
            self._foreign(output, provider)
            return
        if self.connect is not None:
            raise UsageError("-c/--connect goes with domain:NAME (a libvirt domain's daemon)")
        if self.within is not None:
            raise UsageError("--within goes with pid:N (a QEMU kvmlab did not start, inside it)")
        # what neither --host-profile nor --import takes (each also refuses the other's flag)
        others = {
            "--compare": self.compare,
            "--live": self.live,
            "--provider": provider != "auto",
            "--guest": self.guest is not None,
            "--settle": self.settle is not None,
            "--variant": bool(self.variant),
            "--host-side-only": self.host_side_only,
        }
        if self.host_profile:
            refuse_with("--host-profile", {**others, "--import": self.import_ is not None})
            if self.address is None:
                raise UsageError("--host-profile needs the guest's address (LAB/GUEST)")
            run_host_profile(self.address, self._window(), output)
        elif self.import_ is not None:
            refuse_with("--import", others)
            run_import(self.import_, self.address, self.seconds, output)
        elif self.compare:
            self._compare(output, provider)
        else:
            self._profile(output, provider)

    def _foreign(self, output: str, provider: str) -> None:
        """A VM kvmlab did not start (``pid:N``, ``domain:NAME``): profiled from outside."""
        assert self.address is not None
        refuse_with(
            "pid:N" if self.address.startswith("pid:") else "domain:NAME",
            {
                "--compare": self.compare,
                "--import": self.import_ is not None,
                "--guest": self.guest is not None,
                "--settle": self.settle is not None,
                "--variant": bool(self.variant),
            },
        )
        if self.connect is not None and not self.address.startswith("domain:"):
            raise UsageError("-c/--connect goes with domain:NAME (a libvirt domain's daemon)")
        if self.within is not None:
            refuse_with("--within", {"--live": self.live, "--host-profile": self.host_profile})
            run_within(self.within, self.address, self._window(), provider, output)
            return
        run_foreign(
            self.address,
            self.connect,
            self._window(),
            provider,
            self.live,
            output,
            self.host_profile,
        )

    def _window(self) -> float:
        return DEFAULT_SECONDS if self.seconds is None else self.seconds

    def _compare(self, output: str, provider: str) -> None:
        from kvmlab.cli.options import lab_file

        refuse_with("--compare", {"--live": self.live, "--host-side-only": self.host_side_only})
        if self.address is None or self.guest is None:
            raise UsageError(
                "--compare boots a lab: kvmlab exits LAB --compare --guest PATH (the guest "
                "to profile in each variant, e.g. kvmlab exits rtc-storm --compare --guest "
                "l1/idle)"
            )
        settle = 10.0 if self.settle is None else self.settle
        lab = lab_file(self.address)
        run_compare(lab, self.guest, self._window(), settle, output, provider, self.variant or [])

    def _profile(self, output: str, provider: str) -> None:
        if self.guest is not None or self.settle is not None or self.variant:
            raise UsageError("--guest, --settle and --variant go with LAB --compare")
        if self.address is None:
            raise UsageError(
                "give a running guest's address (LAB/GUEST), --import FILE, or LAB --compare"
            )
        guest_side = not self.host_side_only
        run_exits(self.address, self._window(), provider, self.live, output, guest_side)


def run_compare(
    lab_path: Path,
    guest: str,
    seconds: float,
    settle: float,
    output: str,
    provider: str = "auto",
    chosen: Sequence[str] = (),
) -> None:
    """Boot each variant of the lab (``chosen``: those) in turn, profile ``guest`` the
    same way, compare.

    Everything is checked before the first variant boots: the windows, the guest's path,
    that every variant has the guest.
    """
    from rich.console import Console

    from kvmlab.cli.backend_opts import lab_backend
    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.exits.compare import show_compare
    from kvmlab.exits.compare_variants import Window, profile_variants, variants_to_compare
    from kvmlab.progress import Relay
    from kvmlab.runtime.lab import Launch
    from kvmlab.spec import load_lab

    check_seconds(seconds, LIVE_SECONDS)
    check_seconds(settle, (0.0, 3600.0), "--settle")
    loaded = load_lab(lab_path)
    with lab_backend(loaded) as backend:
        if not backend.capabilities.exits_compare:
            raise backend.refusal(loaded, "exits LAB --compare")
    variants = variants_to_compare(loaded, lab_path, guest, chosen)
    host, _ = host_accel()
    err = Console(stderr=True, soft_wrap=True)
    shown = Relay(lambda text: err.print(f"  {text}", highlight=False, markup=False))
    window = Window(seconds, settle, provider)  # type: ignore[arg-type]
    launch = Launch(host, image_factory(), progress=shown)
    profiles = profile_variants(loaded.lab.name, variants, guest, window, launch, interruptible)
    show_compare(profiles, variants.guests, Console(), output)


def run_exits(
    address: str,
    seconds: float,
    provider: str,
    live: bool,
    output: str,
    guest_side: bool = True,
) -> None:
    """Profile ``address`` for ``seconds`` (repeatedly with ``live``) and print it."""
    from kvmlab.exits.collect import profile_guest

    check_window(seconds, live, output)
    run_dir, record = find_guest(address)
    with interruptible(f"profiling the VM exits of {address}"):
        _show_profiles(
            lambda: profile_guest(
                run_dir,
                record,
                seconds,
                provider,  # type: ignore[arg-type]
                guest_side=guest_side,
            ),
            live,
            output,
        )


def run_foreign(
    text: str,
    connect: str | None,
    seconds: float,
    provider: str,
    live: bool,
    output: str,
    host_profile: bool = False,
) -> None:
    """``kvmlab exits pid:N|domain:NAME``: a VM kvmlab did not start, read-only."""
    from kvmlab.exits.foreign import host_profile_foreign, profile_foreign, resolve

    check_window(seconds, live, output)
    target = resolve(text, connect)
    with interruptible(f"profiling {target.label}"):
        if host_profile:
            _show_host_profile(host_profile_foreign(target, seconds), target.label, output)
            return
        _show_profiles(
            lambda: profile_foreign(target, seconds, provider),  # type: ignore[arg-type]
            live,
            output,
        )


def run_within(within: str, text: str, seconds: float, provider: str, output: str) -> None:
    """``kvmlab exits pid:N --within LAB/GUEST``: a QEMU kvmlab did not start, running
    inside guest hypervisor ``within``, profiled there by the kvmlab inside."""
    from kvmlab.exits.foreign import profile_within
    from kvmlab.runtime import backends

    check_window(seconds, False, output)
    run_dir, record = find_guest(within)
    hyper = backends.attach(run_dir, record)
    with interruptible(f"profiling {text} inside {within}"):
        profile = profile_within(hyper, within, text, seconds, provider)  # type: ignore[arg-type]
    _show_profiles(lambda: profile, False, output)


def check_window(seconds: float, live: bool, output: str) -> None:
    """The window's length, and --live only with tables."""
    check_seconds(seconds, LIVE_SECONDS)
    if live and output == "json":
        raise UsageError("--live prints tables; use -o json without --live")


def _show_profiles(take: Callable[[], Profile], live: bool, output: str) -> None:
    """Print the profile ``take`` makes, as JSON or a table; with ``live``, again and again."""
    from rich.console import Console

    from kvmlab.exits.text import show

    console = Console()
    while True:
        profile = take()
        if output == "json":
            print(json.dumps(profile.to_json(), indent=2))
            return
        if live and console.is_terminal:
            console.clear()
        show(profile, console)
        if not live:
            return


def run_host_profile(address: str, seconds: float, output: str) -> None:
    """Sample where ``address``'s QEMU spends its host CPU; print it with its findings."""
    from kvmlab.exits.sampling import host_profile_guest

    check_seconds(seconds, LIVE_SECONDS)
    run_dir, record = find_guest(address)
    with interruptible(f"sampling the host CPU of {address}'s QEMU"):
        profile = host_profile_guest(run_dir, record, seconds)
    _show_host_profile(profile, address, output)


def _show_host_profile(profile: HostProfile, address: str, output: str) -> None:
    """A host profile with its findings, as JSON or text."""
    from rich.console import Console

    from kvmlab.exits.host_rules import evaluate
    from kvmlab.exits.hostprof_text import show

    diagnosis = evaluate(profile, address=address)
    if output == "json":
        doc = profile.to_json()
        doc["findings"] = [f.to_json() for f in diagnosis.findings]
        doc["unchecked"] = list(diagnosis.unchecked)
        print(json.dumps(doc, indent=2))
        return
    show(profile, diagnosis, Console())


def import_seconds(seconds: float | None) -> float:
    """The window of an imported report: given, since perf's output does not say it."""
    if seconds is None:
        raise UsageError(
            "--import needs --seconds, the window perf measured (its output does "
            "not say): 1 for a 'perf kvm stat live' screen, the recording's "
            "length for a report"
        )
    return check_seconds(seconds, IMPORT_SECONDS)


def run_import(path: Path, address: str | None, seconds: float | None, output: str) -> None:
    """Show an imported ``perf kvm stat`` report like a profile kvmlab took."""
    from rich.console import Console

    from kvmlab.exits.perfkvm import import_file

    if not str(path) or str(path) == ".":  # typer turns "" into "."
        raise UsageError("--import: give the file of a 'perf kvm stat report' or a perf.data")
    from kvmlab.exits.text import show

    window = import_seconds(seconds)
    profile = import_file(path, printable(address or str(path)), window)
    if output == "json":
        print(json.dumps(profile.to_json(), indent=2))
        return
    show(profile, Console())
