"""Bringing a lab's top-level guests up and down, with nothing left behind on failure."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvmlab.errors import Problem, ProcessFailure, RuntimeFailure, SpecError, StateError
from kvmlab.fabric.lab_networks import NET_DIR, LabNet, TapPlan, check_vhost_net
from kvmlab.fabric.lab_networks import stop_recorded as stop_recorded_net
from kvmlab.fabric.switch import (
    SWITCH_DIR,
    SWITCH_DIRS,
    Switch,
    lab_ports,
    recorded_alive,
    stop_recorded,
)
from kvmlab.guest.errors import GuestExecTimeout
from kvmlab.guest.image import STANDALONE, GuestImage, build_image
from kvmlab.host.accel import OUTER_ACCEL_ENV
from kvmlab.proc.processes import QEMU, terminate
from kvmlab.proc.signals import deferred_signals
from kvmlab.progress import QUIET, Progress
from kvmlab.render import BootImage, Target
from kvmlab.render.devices.control import ControlPart
from kvmlab.render.devices.disk import SEED_IMAGE
from kvmlab.render.devices.nic import NicPart
from kvmlab.render.identity import tap_name
from kvmlab.render.target import Accel
from kvmlab.runtime import backends, forwarded_ports, nested
from kvmlab.runtime.guest_disks import mount_script
from kvmlab.runtime.guest_kvm import check_guest_kvm, check_host_kvm, local_kvm
from kvmlab.runtime.guest_network import address_script, lab_addresses, setup_script, user_net
from kvmlab.runtime.hostaccel import HostAccel as HostAccel
from kvmlab.runtime.hostcpus import check_host_cpus
from kvmlab.runtime.machine import Backend, Machine, MachineConfig
from kvmlab.runtime.records import GuestNic
from kvmlab.runtime.rundir import GuestEntry, GuestRecord, LabDir, check_socket_paths
from kvmlab.runtime.waits import LIMITS, check_environment
from kvmlab.spec import Guest, Lab, LoadedLab, TapNic, VhostUserNic
from kvmlab.spec.hostcpus import guest_cpu_uses, switch_cpu_uses, tuning_cpu_uses
from kvmlab.spec.rules import guest_key


@dataclass(frozen=True)
class Launch:
    """How a command starts guests: the host's acceleration, the default image (built on
    first use), the backend that runs them, and where progress lines go."""

    host: HostAccel
    image: Callable[[], GuestImage]
    backend: Backend = backends.QEMU
    progress: Progress = QUIET


def boot_image(image: GuestImage, guest: Guest, hostname: str) -> BootImage:
    """The render-side description of the default image for one guest."""
    return BootImage(
        kernel=image.kernel,
        initrd=image.initrd,
        append=image.cmdline(hostname=hostname, kvm=guest.nested),
        share=image.share,
        share_tag=image.share_tag,
    )


def make_target(
    loaded: LoadedLab,
    path: tuple[str, ...],
    guest: Guest,
    host: HostAccel,
    run_dir: Path,
    image: GuestImage | None,
) -> Target:
    """Everything the renderers need for one guest of a lab on this host."""
    extra: dict[str, Any] = {"qemu_binary": guest.qemu} if guest.qemu else {}
    switch = loaded.lab.switch
    if switch is not None and len(path) == 1:
        extra.update(
            switch_dir=LabDir.of(loaded.lab.name).root / SWITCH_DIR, switch_kind=switch.kind
        )
    return Target(
        lab=loaded.lab.name,
        address=path,
        lab_dir=loaded.directory,
        run_dir=run_dir,
        auto_accel=host.accel,
        auto_reason=host.reason,
        virt_flag=host.virt_flag,
        image=boot_image(image, guest, path[-1]) if image and guest.boot == "image" else None,
        **extra,
    )


def image_for(guest: Guest, image: GuestImage | None) -> GuestImage | None:
    """The image ``guest`` boots: the self-contained one when it must stay migratable
    (a mounted host share blocks live migration)."""
    if image is not None and guest.migratable and image.share != STANDALONE:
        return build_image(STANDALONE)
    return image


def guest_config(
    loaded: LoadedLab,
    path: tuple[str, ...],
    guest: Guest,
    host: HostAccel,
    run_dir: Path,
    image: GuestImage | None,
) -> MachineConfig:
    """Describe the machine that runs ``guest``: its spec under the accelerator it runs
    with, its target on this host (with the image it boots), and what is recorded of it.
    Nothing is rendered here: the backend renders what it runs (:meth:`Backend.machine`)."""
    if guest.qemu and not Path(guest.qemu).is_file():
        key = f"{guest_key(path)}.qemu"
        raise SpecError([Problem(str(loaded.path), key, f"{guest.qemu} does not exist")])
    target = make_target(loaded, path, guest, host, run_dir, image_for(guest, image))
    accel, reason = target.accel_for(guest)
    runs = guest.under(accel)
    return MachineConfig(
        lab=loaded.lab.name,
        address=path,
        argv=[],
        run_dir=run_dir,
        accel=accel,
        accel_reason=reason,
        vcpus=runs.vcpus,
        memory=runs.memory.size,
        boots_image=runs.boot == "image",
        pinning={int(k): v for k, v in runs.pinning.vcpus.items()},
        emulator_pinning=runs.pinning.emulator,
        children=bool(runs.nested and runs.guests),
        under_kvm=local_kvm() if accel == "kvm" else {},
        migratable=ControlPart(target).probe,
        nics=guest_nics(runs, target, accel),
        guest=runs,
        target=target,
    )


def guest_nics(guest: Guest, target: Target, accel: Accel) -> tuple[GuestNic, ...]:
    """The guest's vhost-user NICs (by socket) and taps (by name), each with its MAC, as
    the renderers give them to it."""
    found = []
    for index, nic in enumerate(guest.nics):
        part = NicPart(nic, index, target, accel)
        if isinstance(nic, VhostUserNic):
            found.append(GuestNic("vhost-user", str(target.vhost_user(nic)[0]), part.mac))
        elif isinstance(nic, TapNic) and part.ifname is not None:
            found.append(GuestNic("tap", part.ifname, part.mac))
    return tuple(found)


def ensure_disks(loaded: LoadedLab, path: tuple[str, ...], guest: Guest) -> None:
    """Create missing disk images that have a size; a missing one without a size is an error."""
    for i, disk in enumerate(guest.disks):
        file = Path(disk.path) if Path(disk.path).is_absolute() else loaded.directory / disk.path
        if file.exists():
            continue
        if disk.size is None:
            key = f"{guest_key(path)}.disks[{i}].path"
            raise SpecError([Problem(str(loaded.path), key, f"{file} does not exist; set size")])
        file.parent.mkdir(parents=True, exist_ok=True)
        argv = ["qemu-img", "create", "-q", "-f", disk.format, str(file), str(disk.size)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise ProcessFailure(
                f"cannot create {file}", argv, proc.returncode, proc.stderr.splitlines()[-5:]
            )


def prepare_guest(machine: Machine, lab: Lab, path: tuple[str, ...], guest: Guest) -> None:
    """After boot, what the default image does not do itself: mounts, user networking, the
    addresses (and channels) of NICs on the lab's networks."""
    mounts = mount_script(guest) if guest.boot == "image" else None
    if mounts is not None:
        _setup(machine, mounts, "mounting its disks")
    if guest.cloud_init is not None:
        # The agent starts before cloud-init's later stages: wait until it has finished.
        done = machine.exec(["cloud-init", "status", "--wait"], timeout=600)
        if done.returncode not in (0, 2):  # 2: finished with recoverable errors
            raise RuntimeFailure(
                f"{machine.config.name}: cloud-init failed: "
                f"{(done.stdout + done.stderr).decode(errors='replace').strip()[-500:]}"
            )
    net = user_net(lab.name, path, guest) if guest.boot == "image" else None
    if net is not None:
        _setup(machine, setup_script(net), "network set-up")
    if len(path) == 1 and (own := lab_addresses(lab, path, guest)):
        _setup(machine, address_script(own), "addresses on the lab's networks")
    if guest.background:
        start_background(machine, guest.background)


BACKGROUND_GRACE_S = 1.0
"""How long a background command must keep running after its start to count as started
(an early exit, a missing program or device, is caught; a later one only by its log)."""


def background_argv(command: str) -> list[str]:
    """``command``'s words; kvmlab's own guest programs (``kvmlab-rtc``) by their path
    beside kvmlab, which a guest sharing the host root sees at the same place."""
    words = shlex.split(command)
    if "/" not in words[0] and words[0].startswith("kvmlab-"):
        beside = Path(sys.executable).with_name(words[0])
        if beside.is_file():
            words[0] = str(beside)
    return words


def announces_ready(command: str) -> bool:
    """Whether ``command`` is one of kvmlab's own guest programs (found beside kvmlab, not
    a program of the user's of a like name), which print their first line only once they
    run as asked (``kvmlab-rtc``: the ticks are on) or have failed."""
    return background_argv(command)[0] != shlex.split(command)[0]


def start_background(machine: Machine, commands: Sequence[str]) -> list[int]:
    """Start a lab's background ``commands`` in the guest, each one's output to
    ``/run/kvmlab-background-N.log`` there; their guest pids. kvmlab's own programs are
    waited for until they say they run (a profile taken after ``up`` must see their
    steady state, and a Python program starting over a nested 9p share on a loaded host
    takes seconds); then every one must still run after :data:`BACKGROUND_GRACE_S`
    (scaled by the guest's slowness, once for them all). One that has exited is a
    RuntimeFailure with what it printed."""
    started = []
    for i, command in enumerate(commands):
        log = f"/run/kvmlab-background-{i}.log"
        argv = ["sh", "-c", 'exec "$@" >"$0" 2>&1', log, *background_argv(command)]
        started.append((command, log, machine.exec_background(argv)))
    for command, log, pid in started:
        if announces_ready(command):
            _await_first_line(machine, command, log, pid)
    # then the grace, for them all: a program that printed an error is exiting by then
    time.sleep(BACKGROUND_GRACE_S * max(1.0, machine.level_factor()))
    for command, log, pid in started:
        alive = machine.exec(["sh", "-c", 'kill -0 "$1" 2>/dev/null', "-", str(pid)], timeout=60)
        if alive.returncode != 0:
            said = machine.exec(["tail", "-n", "5", log], timeout=60).stdout
            text = said.decode(errors="replace").strip()
            raise RuntimeFailure(
                f"{machine.config.name}: background command {command!r} exited at once"
                + (f": {text}" if text else "")
            )
    return [pid for _, _, pid in started]


FIRST_LINE_WAIT = 'while [ ! -s "$0" ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; done'
"""Guest-side shell (``$0`` the log, ``$1`` the pid): returns once the log has a byte or
the process is gone."""


def _await_first_line(machine: Machine, command: str, log: str, pid: int) -> None:
    """Wait in the guest until background ``command`` (guest ``pid``) has written to
    ``log`` or exited, bounded by the ``setup`` limit at the guest's speed."""
    limit = LIMITS["setup"]
    timeout = limit.value("ceiling", machine.level_factor())
    try:
        machine.exec(["sh", "-c", FIRST_LINE_WAIT, log, str(pid)], timeout=timeout)
    except GuestExecTimeout as exc:
        what = f"{machine.config.name}: background command {command!r} saying it runs"
        raise limit.exceeded(what, timeout, str(exc)) from None


def _setup(machine: Machine, argv: list[str], what: str) -> None:
    """Run a set-up command in the guest, bounded by the ``setup`` limit at its speed."""
    limit = LIMITS["setup"]
    timeout = limit.value("ceiling", machine.level_factor())
    try:
        result = machine.exec(argv, timeout=timeout)
    except GuestExecTimeout as exc:
        raise limit.exceeded(f"{machine.config.name}: {what}", timeout, str(exc)) from None
    if result.returncode != 0:
        why = result.stderr.decode(errors="replace").strip()
        raise RuntimeFailure(f"{machine.config.name}: {what} failed: {why}")


def assert_not_up(lab: str) -> None:
    """Refuse (:class:`StateError`) when any guest of lab ``lab`` has a live QEMU.

    Half-started and orphaned guests (their ``kvmlab up`` died) and guests whose record
    cannot be read count too: their QEMU still holds disks and ports.
    """
    lab_dir = LabDir.of(lab)
    live = [f"{e.name} {e.state()}" for e in lab_dir.live()]
    for name in SWITCH_DIRS if lab_dir.exists() else ():
        if (pid := recorded_alive(lab_dir.root / name)) is not None:
            live.append(f"its switch ({name}), pid {pid}")
    if live:
        raise StateError(
            f"lab {lab_dir.lab} is already up ({', '.join(live)}); "
            f"run 'kvmlab down {lab_dir.lab}' first"
        )


def clean_stale(lab_dir: LabDir) -> list[str]:
    """Remove the run state of guests whose QEMU died; refuse when any still runs."""
    assert_not_up(lab_dir.lab)
    stale = [e.name for e in lab_dir.entries()]
    for name in SWITCH_DIRS:  # a killed kvmlab's switch: its huge pages go back too
        if lab_dir.exists() and stop_recorded(lab_dir.root / name):
            stale.append(f"the switch in {name}")
    if lab_dir.exists() and stop_recorded_net(lab_dir.root / NET_DIR, lab_dir.lab):
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
    sw_ports = [] if within or loaded.lab.switch is None else lab_ports(loaded.lab)
    sw_dir = lab_dir.root / SWITCH_DIR
    check_socket_paths(
        lab_dir, ours, [(f"switch port {p}", sw_dir / f"{p}.sock") for p in sw_ports]
    )
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
            cpu_uses = guest_cpu_uses(loaded.lab, [n for n, _ in here])
            if loaded.lab.switch is not None and not within:
                cpu_uses += switch_cpu_uses(loaded.lab)
            if loaded.lab.bench.pvp.compare_tuning and not within:
                cpu_uses += tuning_cpu_uses(loaded.lab)
            check_host_cpus(str(loaded.path), cpu_uses)  # pinned CPUs this host lacks
            if loaded.lab.switch is not None and not within:
                _start_switch(loaded, lab_dir, switch, progress)
            if loaded.lab.networks and not within:
                nets.append(LabNet(loaded.lab, lab_dir.root / NET_DIR))
                plans = tap_plans(loaded.lab, [n for n, _ in chosen])
                progress.step(
                    f"creating the lab's networks ({', '.join(loaded.lab.networks)}) in "
                    f"network namespace {nets[0].ns}"
                )
                nets[0].start(plans)
            booting = Booting(loaded, outer, lab_dir, path, start_inner, nets[0] if nets else None)
            _boot_all(booting, launch, chosen, machines)
            yield machines
        finally:
            if mine:
                failing = sys.exc_info()[0] is not None
                with deferred_signals():  # a second Ctrl-C does not cut the clean-up short
                    _stop_owned(machines, lab_dir, failing, [*switch, *nets])


def tap_plans(lab: Lab, guests: Sequence[str]) -> list[TapPlan]:
    """The taps of these top-level guests' NICs on the lab's networks."""
    return [
        TapPlan(name, tap_name(lab.name, (name,), i), nic.network)
        for name in guests
        for i, nic in enumerate(lab.guests[name].nics)
        if isinstance(nic, TapNic) and nic.network is not None
    ]


def _start_switch(
    loaded: LoadedLab, lab_dir: LabDir, out: list[Switch], progress: Progress
) -> None:
    """Start the lab's switch (on record in ``out`` from the moment it spawns)."""
    spec = loaded.lab.switch
    assert spec is not None
    sw = Switch(loaded.lab.name, spec, lab_dir.root / SWITCH_DIR, lab_ports(loaded.lab))
    out.append(sw)
    progress.step(f"starting the {spec.kind} switch (ports {', '.join(sw.ports)})")
    sw.start(outlive=True)


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
        failed: list[BaseException] = []
        for part in switch:  # each is stopped even when another would not stop
            try:
                part.stop()
            except Exception as exc:  # raised below, after the others are stopped
                failed.append(exc)
        if failed:
            raise failed[0]
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
        for name in SWITCH_DIRS if not survivors else ():
            if stop_recorded(lab_dir.root / name):
                progress.step(f"stopped the switch ({name})")
        if not survivors and stop_recorded_net(lab_dir.root / NET_DIR, lab_dir.lab):
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
