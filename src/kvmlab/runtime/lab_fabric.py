"""A lab's switch and networks as ``up`` and ``down`` handle them: started before its
guests, their taps, and stopped after them, or found on record and stopped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kvmlab.fabric.lab_networks import NET_DIR, LabNet, TapPlan
from kvmlab.fabric.lab_networks import stop_recorded as stop_recorded_net
from kvmlab.fabric.switch import (
    SWITCH_DIR,
    SWITCH_DIRS,
    Switch,
    lab_ports,
    recorded_alive,
    stop_recorded,
)
from kvmlab.progress import Progress
from kvmlab.render.identity import tap_name
from kvmlab.runtime.rundir import LabDir
from kvmlab.spec import Lab, LoadedLab, TapNic


def tap_plans(lab: Lab, guests: Sequence[str]) -> list[TapPlan]:
    """The taps of these top-level guests' NICs on the lab's networks."""
    return [
        TapPlan(name, tap_name(lab.name, (name,), i), nic.network)
        for name in guests
        for i, nic in enumerate(lab.guests[name].nics)
        if isinstance(nic, TapNic) and nic.network is not None
    ]


def switch_sockets(lab: Lab, lab_dir: LabDir) -> list[tuple[str, Path]]:
    """The unix socket of each port of the lab's switch (none without a switch)."""
    ports = [] if lab.switch is None else lab_ports(lab)
    return [(f"switch port {p}", lab_dir.root / SWITCH_DIR / f"{p}.sock") for p in ports]


def start_switch(loaded: LoadedLab, lab_dir: LabDir, out: list[Switch], progress: Progress) -> None:
    """Start the lab's switch (on record in ``out`` from the moment it spawns)."""
    spec = loaded.lab.switch
    assert spec is not None
    sw = Switch(loaded.lab.name, spec, lab_dir.root / SWITCH_DIR, lab_ports(loaded.lab))
    out.append(sw)
    progress.step(f"starting the {spec.kind} switch (ports {', '.join(sw.ports)})")
    sw.start(outlive=True)


def start_networks(
    loaded: LoadedLab, lab_dir: LabDir, guests: Sequence[str], out: list[LabNet], progress: Progress
) -> None:
    """Create the lab's networks in their namespace, with the taps of ``guests`` (on record
    in ``out`` before anything is created)."""
    net = LabNet(loaded.lab, lab_dir.root / NET_DIR)
    out.append(net)
    plans = tap_plans(loaded.lab, guests)
    progress.step(
        f"creating the lab's networks ({', '.join(loaded.lab.networks)}) in "
        f"network namespace {net.ns}"
    )
    net.start(plans)


def stop_all(parts: Sequence[Switch | LabNet]) -> None:
    """Stop each part, even when another would not stop; then raise the first failure."""
    failed: list[BaseException] = []
    for part in parts:
        try:
            part.stop()
        except Exception as exc:  # raised below, after the others are stopped
            failed.append(exc)
    if failed:
        raise failed[0]


def live_switches(lab_dir: LabDir) -> list[str]:
    """The lab's recorded switches that still run, in words with their pids."""
    found = []
    for name in SWITCH_DIRS if lab_dir.exists() else ():
        if (pid := recorded_alive(lab_dir.root / name)) is not None:
            found.append(f"its switch ({name}), pid {pid}")
    return found


def stop_recorded_switches(lab_dir: LabDir) -> list[str]:
    """Stop the lab's recorded switches (a killed kvmlab's: their huge pages go back too);
    the run-directory names of those there were to stop."""
    return [name for name in SWITCH_DIRS if lab_dir.exists() and stop_recorded(lab_dir.root / name)]


def stop_recorded_networks(lab_dir: LabDir) -> bool:
    """Delete the lab's recorded networks' namespace; whether there was one."""
    return lab_dir.exists() and stop_recorded_net(lab_dir.root / NET_DIR, lab_dir.lab)
