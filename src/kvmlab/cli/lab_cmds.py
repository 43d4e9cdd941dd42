"""``kvmlab image``, ``up``, ``ps``, ``exec``, ``console`` and ``down``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.errors import Interrupted, StateError, UsageError
from kvmlab.proc.signals import interrupting
from kvmlab.runtime.rundir import GuestRecord, LabDir
from kvmlab.spec.names import lab_name, parse_address

if TYPE_CHECKING:
    from kvmlab.cli.backend_opts import BackendOptions
    from kvmlab.guest.image import GuestImage
    from kvmlab.runtime.machine import Machine
    from kvmlab.spec import LoadedLab


@contextmanager
def interruptible(what: str) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP end as :class:`Interrupted` after clean-up ran.

    SIGHUP is what a closed terminal or a dropped ssh session sends: the guests being
    started are stopped, not left running unrecorded.
    """
    try:
        with interrupting():
            yield
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while {what}; everything it started was stopped") from None


def image_factory() -> Callable[[], GuestImage]:
    """How to get the default image: the outer level's entry inside a guest, else build it."""
    from kvmlab.guest.image import build_default_image, open_image
    from kvmlab.runtime.nested import IMAGE_ENV

    if entry := os.environ.get(IMAGE_ENV):
        return lambda: open_image(Path(entry), verify=False)
    return build_default_image


def run_up(
    lab_path: Path,
    guest: str | None,
    within: str | None = None,
    as_json: bool = False,
    variant: str | None = None,
    backend_opts: BackendOptions | None = None,
) -> None:
    """Start a lab's guests and print their boot stages."""
    from rich.console import Console

    from kvmlab.cli.backend_opts import BackendOptions, choose_backend
    from kvmlab.cli.hostinfo import host_accel, print_nested_preflight
    from kvmlab.cli.progress import indented
    from kvmlab.runtime import lab as labrun

    loaded = _lab_to_start(lab_path, variant, within)
    backend = choose_backend(loaded, backend_opts or BackendOptions())
    host, choice = host_accel()
    console = Console(stderr=True, soft_wrap=True)
    console.print(f"accelerator for accel=auto: {choice.accel} ({choice.reason})")
    if within is None:
        print_nested_preflight(loaded.lab, choice, console)
    progress = indented(console)
    with interruptible(f"starting lab {loaded.lab.name}"), progress.live():
        launch = labrun.Launch(host, image_factory(), backend, progress)
        machines = labrun.up(loaded, launch, only=guest, within=within)
    if as_json:
        from dataclasses import asdict

        from kvmlab.cli.jsonout import emit

        emit("up", {"lab": loaded.lab.name, "guests": [asdict(m.record()) for m in machines]})
        return
    _print_boot_stages(loaded.lab.name, machines)


def _lab_to_start(lab_path: Path, variant: str | None, within: str | None) -> LoadedLab:
    """The lab ``kvmlab up`` starts (``variant``: that configuration), checked."""
    from kvmlab.spec import load_lab

    loaded = load_lab(lab_path)
    if variant is not None:
        loaded = loaded.variant_named(variant)
    if within is not None and (loaded.lab.find(within) is None or not loaded.lab.guests):
        raise UsageError(f"lab {loaded.lab.name} has no guest hypervisor {within!r}")
    return loaded


def _print_boot_stages(lab: str, machines: Sequence[Machine]) -> None:
    from rich.console import Console

    from kvmlab.report.grid import Col, print_grid
    from kvmlab.runtime.boot_table import boot_table

    shown, rows = boot_table(machines)
    columns = [Col("guest"), Col("accel"), *(Col(s, "right") for s in shown)]
    title = f"lab {lab} is up: boot stages in seconds (measured)"
    print_grid(Console(), columns, rows, title=title)


def find_guest(address: str) -> tuple[Path, GuestRecord]:
    """The run directory and record of a running guest (at any level), or a clear error."""
    lab, path = parse_address(address)
    lab_dir = LabDir.of(lab)
    run_dir = lab_dir.guest_dir(path)
    entry = next((e for e in lab_dir.entries() if e.address == path), None)
    if entry is None:
        up = [e.name for e in lab_dir.entries()]
        if up:
            hint = f"lab {lab} runs {', '.join(up)}; kvmlab ps lists every guest"
        else:
            hint = f"lab {lab} is not up: kvmlab up {lab} starts it (a lab file or a shipped lab)"
        raise StateError(f"no running guest {address} ({hint})")
    record, state = entry.record, entry.state()
    if record is None:
        raise StateError(f"{address}: {entry.problem}; 'kvmlab down {lab}' stops what is left")
    if state != "running":
        why = {
            "dead": "its QEMU exited",
            "launching": "it is still starting",
            "orphaned": "the 'kvmlab up' that started it died",
        }[state]
        raise StateError(f"{address} is not running: {why}; 'kvmlab down {lab}' cleans up")
    return run_dir, record


def lab_named(text: str) -> str:
    """The name of the lab ``text`` means: a lab's name as ``kvmlab ps`` shows it, or a lab
    file (a path, or a shipped lab's name) whose ``name`` is read."""
    from kvmlab.runtime.rundir import LabDir
    from kvmlab.spec.names import is_name

    if is_name(text) and LabDir.of(text).exists():
        return text
    from kvmlab.labs import find_lab
    from kvmlab.spec import load_lab

    if is_name(text) or text.endswith(".toml") or "/" in text:
        try:
            path = find_lab(text)
        except UsageError:
            return lab_name(text)  # a name of no lab that is up and no shipped lab
        if path.is_file():
            return load_lab(path).lab.name
    return lab_name(text)


def run_down(lab: str, force: bool) -> None:
    """Stop a lab's guests and remove its run state."""
    from kvmlab.cli.progress import lines
    from kvmlab.runtime import lab as labrun

    lab = lab_named(lab)
    with interruptible(f"stopping lab {lab}"):
        stopped = labrun.down(lab, force=force, progress=lines("  "))
    print(f"lab {lab} is down ({len(stopped)} guest(s) stopped)")
