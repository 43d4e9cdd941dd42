"""Bringing a lab's top-level guests up and down, with nothing left behind on failure: the
public entry points (``Launch``, ``started``, ``up``, ``down``) over the guest config
(:mod:`.guest_config`), its set-up (:mod:`.guest_setup`, :mod:`.background`) and the lab's
switch and networks (:mod:`.lab_fabric`)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from kvmlab.errors import HostError, RuntimeFailure, StateError
from kvmlab.fabric.lab_networks import LabNet, check_vhost_net
from kvmlab.fabric.switch import Switch
from kvmlab.guest.image import GuestImage
from kvmlab.host.accel import OUTER_ACCEL_ENV
from kvmlab.proc.processes import QEMU, terminate
from kvmlab.proc.signals import deferred_signals
from kvmlab.progress import QUIET, Progress
from kvmlab.render.devices.disk import SEED_IMAGE
from kvmlab.runtime import backends, forwarded_ports, nested
from kvmlab.runtime.background import (
    BACKGROUND_GRACE_S,
    FIRST_LINE_WAIT,
    announces_ready,
    background_argv,
    start_background,
)
from kvmlab.runtime.guest_config import boot_image, guest_config, guest_nics, image_for, make_target
from kvmlab.runtime.guest_kvm import check_guest_kvm, check_host_kvm
from kvmlab.runtime.guest_setup import ensure_disks, prepare_guest
from kvmlab.runtime.host_needs import check_external_sockets, check_guest_hugepages
from kvmlab.runtime.hostaccel import HostAccel
from kvmlab.runtime.hostcpus import check_host_cpus
from kvmlab.runtime.lab_fabric import (
    live_switches,
    start_networks,
    stop_all,
    stop_recorded_networks,
    stop_recorded_switches,
    switch_sockets,
    tap_plans,
)
from kvmlab.runtime.lab_fabric import start_switch as _start_switch  # tests stub it here
from kvmlab.runtime.machine import Backend, Machine
from kvmlab.runtime.rundir import GuestEntry, GuestRecord, LabDir, check_socket_paths
from kvmlab.runtime.waits import check_environment
from kvmlab.spec import Guest, LoadedLab
from kvmlab.spec.hostcpus import guest_cpu_uses, switch_cpu_uses, tuning_cpu_uses

__all__ = [
    "BACKGROUND_GRACE_S",
    "FIRST_LINE_WAIT",
    "Booting",
    "HostAccel",
    "Launch",
    "announces_ready",
    "assert_not_up",
    "background_argv",
    "boot_image",
    "clean_stale",
    "down",
    "ensure_disks",
    "guest_config",
    "guest_nics",
    "image_for",
    "make_target",
    "prepare_guest",
    "start_background",
    "start_nested",
    "started",
    "tap_plans",
    "up",
]
"""The public names, here since before the lab's jobs had modules of their own."""


@dataclass(frozen=True)
class Launch:
    """How a command starts guests: the host's acceleration, the default image (built on
    first use), the backend that runs them, and where progress lines go."""

    host: HostAccel
    image: Callable[[], GuestImage]
    backend: Backend = backends.QEMU
    progress: Progress = QUIET


def assert_not_up(lab: str) -> None:
    """Refuse (:class:`StateError`) when any guest of lab ``lab`` has a live QEMU.

    Half-started and orphaned guests (their ``kvmlab up`` died) and guests whose record
    cannot be read count too: their QEMU still holds disks and ports.
    """
    lab_dir = LabDir.of(lab)
    live = [f"{e.name} {e.state()}" for e in lab_dir.live()]
    live += live_switches(lab_dir)
    if live:
        raise StateError(
            f"lab {lab_dir.lab} is already up ({', '.join(live)}); "
            f"run 'kvmlab down {lab_dir.lab}' first"
        )


def clean_stale(lab_dir: LabDir) -> list[str]:
    """Remove the run state of guests whose QEMU died; refuse when any still runs."""
    assert_not_up(lab_dir.lab)
    stale = [e.name for e in lab_dir.entries()]
    stale += [f"the switch in {name}" for name in stop_recorded_switches(lab_dir)]
    if stop_recorded_networks(lab_dir):
        stale.append("its networks' namespace")
    lab_dir.clear()
    return stale


@contextmanager
def started(
    loaded: LoadedLab,
    launch: Launch,
    only: str | None = None,
    within: str | None = None,
    start_inner: bool = True,
) -> Iterator[list[Machine]]:
    """The lab's top-level guests (or ``only`` one), booted, for the ``with`` block.

    With ``within`` (run inside a guest hypervisor), the guests of that hypervisor
    take the top level. Guest hypervisors start their own guests with kvmlab inside,
    at once, or (``start_inner=False``) when the caller asks with :func:`start_nested`.
    On leaving the block, by an error, Ctrl-C or normally, every guest not detached
    is stopped (children first) and the lab's run directory removed. ``launch.backend``
    runs the guests (kvmlab's own QEMU, or a libvirtd).
    """
    backend, progress = launch.backend, launch.progress
    check_environment()  # every limit the environment sets, before anything starts
    nests = start_inner and any(g.guests for _, g in loaded.lab.walk())
    if nests and (why := nested.unseen_install()):
        raise HostError(why)
    if not (within and os.environ.get(OUTER_ACCEL_ENV)):  # inside L1: the host is L0's to check
        check_host_kvm(loaded)
    outer = loaded
    path = tuple(within.split("/")) if within else ()
    if within:
        loaded = replace(loaded, lab=loaded.lab.within(within))
    lab_dir = LabDir.of(loaded.lab.name)
    chosen = [(name, g) for name, g in loaded.lab.guests.items() if only in (None, name)]
    if not chosen:
        known = ", ".join(loaded.lab.guests)
        raise StateError(f"lab {loaded.lab.name} has no top-level guest {only!r} ({known})")
    # every unix socket path fits, before anything starts (libvirt makes its own)
    ours = [((n,), list(g.guests)) for n, g in chosen if backend.makes_guest_sockets]
    check_socket_paths(lab_dir, ours, [] if within else switch_sockets(loaded.lab, lab_dir))
    backend.check(loaded, only, start_inner)  # before anything is created
    machines: list[Machine] = []
    switch: list[Switch] = []
    nets: list[LabNet] = []
    mine = False  # the lab was not up: this call owns its run state until it hands it over
    with contextlib.ExitStack() as stack:
        try:
            with deferred_signals():  # locked and checked, or neither
                stack.enter_context(lab_dir.locked())
                stale = clean_stale(lab_dir)  # refuses while the lab runs: nothing to undo
                mine = True
            for name in stale:
                progress.step(f"cleaned up {name}: its QEMU had died")
            here = [
                (n, g)
                for n, g in chosen  # guests of a daemon elsewhere bind there
                if backend.on_this_host(g)
            ]
            if not within and here:
                # a guest hypervisor's forwards live in its own network stack
                forwarded_ports.check_free(str(loaded.path), [((n,), g) for n, g in here])
                check_vhost_net(str(loaded.path), loaded.lab, [n for n, _ in here])
                names = [n for n, _ in here]
                check_external_sockets(str(loaded.path), loaded.directory, loaded.lab, names)
                check_guest_hugepages(str(loaded.path), loaded.lab, names)
            cpu_uses = guest_cpu_uses(loaded.lab, [n for n, _ in here])
            if loaded.lab.switch is not None and not within:
                cpu_uses += switch_cpu_uses(loaded.lab)
            if loaded.lab.bench.pvp.compare_tuning and not within:
                cpu_uses += tuning_cpu_uses(loaded.lab)
            check_host_cpus(str(loaded.path), cpu_uses)  # pinned CPUs this host lacks
            if loaded.lab.switch is not None and not within:
                _start_switch(loaded, lab_dir, switch, progress)
            if loaded.lab.networks and not within:
                start_networks(loaded, lab_dir, [n for n, _ in chosen], nets, progress)
            booting = Booting(loaded, outer, lab_dir, path, start_inner, nets[0] if nets else None)
            _boot_all(booting, launch, chosen, machines)
            yield machines
        finally:
            if mine:
                failing = sys.exc_info()[0] is not None
                with deferred_signals():  # a second Ctrl-C does not cut the clean-up short
                    _stop_owned(machines, lab_dir, failing, [*switch, *nets])


def _stop_owned(
    machines: list[Machine], lab_dir: LabDir, failing: bool, switch: Sequence[Switch | LabNet] = ()
) -> None:
    """Stop the machines not handed over (children first); remove the lab's state if none was.

    A machine that cannot be stopped keeps the state on disk for ``kvmlab down``. The
    switch stops after the guests, when none was handed over.
    """
    owned = [m for m in machines if not m.detached]
    for machine in reversed(owned):
        if machine.config.children and not failing and machine.is_alive():
            nested.stop_children(machine, lab_dir.lab)
        machine.shutdown(force=failing)
    survivors = [m.config.name for m in owned if m.is_alive()]
    if survivors:
        raise RuntimeFailure(
            f"could not stop {', '.join(survivors)}; its state is kept: 'kvmlab down {lab_dir.lab}'"
        )
    if len(owned) == len(machines):
        stop_all(switch)
        lab_dir.clear()
        lab_dir.remove()


@dataclass(frozen=True)
class Booting:
    """The lab being booted: as started (``loaded``, within a guest hypervisor when
    ``within``) and as written (``outer``), its run directory, whether guest hypervisors
    start their own guests now (``start_inner``), and its networks."""

    loaded: LoadedLab
    outer: LoadedLab
    lab_dir: LabDir
    within: tuple[str, ...]
    start_inner: bool
    net: LabNet | None


def _boot_all(
    booting: Booting, launch: Launch, chosen: list[tuple[str, Guest]], machines: list[Machine]
) -> None:
    """Boot each chosen guest in order, appending each to ``machines`` before it launches;
    its taps join the lab's networks once it is up.

    ``booting.start_inner`` False: the guests' own guests are left for :func:`start_nested`.
    """
    loaded, outer, lab_dir, within = booting.loaded, booting.outer, booting.lab_dir, booting.within
    host, image, backend, progress = launch.host, launch.image, launch.backend, launch.progress
    start_inner, net = booting.start_inner, booting.net
    lab_dir.write_info(loaded.path, loaded.digest)
    built = image() if any(g.boot == "image" for _, g in chosen) else None
    for name, guest in chosen:
        path = (name,)
        ensure_disks(loaded, path, guest)
        config = guest_config(loaded, path, guest, host, lab_dir.guest_dir(path), built)
        if guest.cloud_init is not None:
            from kvmlab.guest.cloudinit import write_seed

            lab_dir.create_guest_dir(path)
            write_seed(config.run_dir / SEED_IMAGE, guest.cloud_init, hostname=name)
        machine = backend.machine(loaded, path, guest, config, progress)
        machines.append(machine)
        progress.step(f"starting {config.name} ({config.accel}: {config.accel_reason})")
        attach = net.attacher(tap_plans(loaded.lab, [name])) if net is not None else None
        machine.launch(on_up=attach)  # the taps leave the host's namespace at once
        prepare_guest(machine, loaded.lab, path, guest)
        if config.children and start_inner:
            start_nested(machine, outer, built, progress, within)


def start_nested(
    machine: Machine,
    outer: LoadedLab,
    image: GuestImage | None,
    progress: Progress = QUIET,
    within: tuple[str, ...] = (),
) -> list[GuestRecord]:
    """Start a running guest hypervisor's guests inside it (``kvmlab up`` there), once its
    own KVM is seen to be as the lab says."""
    address = "/".join((*within, *machine.config.address))
    written = outer.lab.find(address)
    kvm = written.under(machine.config.accel).kvm if written is not None else None
    if kvm is not None and kvm.asked():
        params = check_guest_kvm(machine, kvm)
        shown = ", ".join(f"{k}={v}" for k, v in params.items())
        progress.step(f"{machine.config.name}'s KVM: {shown} (read back from its /sys/module)")
    progress.step(f"starting the guests of {machine.config.name} inside it (kvmlab up there)")
    children = nested.start_children(machine, outer, address, image)
    for child in children:
        took = child.boot.get("total", 0)
        progress.step(
            f"{child.name} is up inside {machine.config.name} ({child.accel}, "
            f"{took:.1f} s to its agent): {child.accel_reason}"
        )
    return children


def up(
    loaded: LoadedLab, launch: Launch, only: str | None = None, within: str | None = None
) -> list[Machine]:
    """Start the lab's top-level guests (or ``only`` one) and leave them running."""
    with started(loaded, launch, only, within) as machines:
        for machine in machines:
            machine.detach()
    return machines


def down(lab: str, force: bool = False, progress: Progress = QUIET) -> list[str]:
    """Stop every guest of a lab (children first) and remove its run directory.

    Half-started, orphaned and unreadable guests are found by their run directory and
    stopped too (each process confirmed before it is signalled). The run state is
    removed only once no process of the lab is left; otherwise it is kept and the
    survivors named.
    """
    lab_dir = LabDir.of(lab)
    if not lab_dir.exists():
        raise StateError(f"lab {lab_dir.lab} is not up (kvmlab ps lists the labs that are)")
    stopped: list[str] = []
    with lab_dir.locked():
        entries = list(lab_dir.entries())
        for entry in sorted(entries, key=lambda e: -len(e.address)):
            with deferred_signals():  # one guest stopped, or not touched
                if _stop_entry(entry, lab_dir.lab, force, progress):
                    stopped.append(entry.name)
        survivors = [
            f"{e.name} (pid {', '.join(map(str, e.processes()))})" for e in entries if e.processes()
        ]
        for name in stop_recorded_switches(lab_dir) if not survivors else ():
            progress.step(f"stopped the switch ({name})")
        if not survivors and stop_recorded_networks(lab_dir):
            progress.step("deleted the lab's networks")
        if survivors:
            raise RuntimeFailure(
                f"could not stop {', '.join(survivors)}; the run state in {lab_dir.root} is kept"
            )
        lab_dir.remove()
    return stopped


def _stop_entry(entry: GuestEntry, lab: str, force: bool, progress: Progress) -> bool:
    """Stop one guest's QEMU; True when there was one to stop."""
    record = entry.record
    if record is not None and record.via is not None:
        return False  # stopped from inside its guest hypervisor
    stopped = False
    if record is not None:
        kind = backends.machine_class(record.backend)
        kind.check_reachable(record)  # an unreachable daemon: down fails, the state is kept
        machine = kind.from_record(entry.run_dir, record)
        stopped = machine.stop_as_recorded(record, force, progress, nested.stop_children)
        if kind.daemon_owns_process:
            return stopped  # its QEMU is the daemon's: kvmlab never signals it
    for pid in entry.processes():  # never recorded, or recorded unreadably
        why = entry.problem or "its record has no pid"
        progress.step(f"stopping QEMU pid {pid} of {entry.name} ({why})")
        terminate(pid, f"{entry.run_dir}/", grace=3.0, program=QEMU)
        stopped = True
    return stopped
