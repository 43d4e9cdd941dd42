"""PVP in a benchmark run: the loopback ceiling at L0 (no guest), then the lab brought up
(switch first) and packets sent through its PVP guest at L1, for every frame size."""

from __future__ import annotations

from collections.abc import Callable

from kvmlab.errors import StateError
from kvmlab.fabric.switch import GEN_PORT, SINK_PORT, SWITCH_DIR, Switch, lab_ports
from kvmlab.net.guest_dpdk import GuestTestPmd, guest_argv
from kvmlab.net.pvp import (
    TRAFFIC_DIR,
    WORKLOAD,
    Where,
    describe,
    loopback,
    measure,
    pvp_hops,
    traffic_cores,
)
from kvmlab.net.traffic import SwitchCounted, traffic
from kvmlab.net.tune import Toggle, cpu_partitioning
from kvmlab.proc.confined import create_owned, remove_owned
from kvmlab.render.identity import derived_mac
from kvmlab.results.model import Sample
from kvmlab.runtime import lab as labrun
from kvmlab.runtime.rundir import LabDir
from kvmlab.spec import LoadedLab
from kvmlab.spec.rules import switch_ports

At = Callable[[str, str, str], None]
"""``at(level, guest, stage)``: tells the caller where a failure would be filed."""


def pvp_guest(loaded: LoadedLab) -> str | None:
    """The guest PVP runs through: ``[bench.pvp] guest``, else the first with two ports."""
    lab = loaded.lab
    if lab.bench.pvp.guest is not None:
        return lab.bench.pvp.guest
    return next(
        (
            n
            for n, g in lab.guests.items()
            if len([1 for _, n in switch_ports(g) if n.address is None]) >= 2
        ),
        None,
    )


def run_pvp(
    loaded: LoadedLab,
    variant: str,
    levels: set[str],
    reps: int,
    launch: labrun.Launch,
    at: At,
    store: Callable[[list[Sample]], None],
) -> None:
    """Loopback at L0 (when asked), PVP through the guest at L1 (when the lab has one, run
    by ``launch.backend``); ``store`` gets each part's samples as soon as they are
    measured."""
    progress = launch.progress
    lab, spec = loaded.lab, loaded.lab.switch
    assert spec is not None
    pvp = lab.bench.pvp
    reps = pvp.repetitions or reps
    tuning = None
    if pvp.compare_tuning and lab.tuning is not None:
        isolated = lab.tuning.isolated or spec.cores
        accept = lab.tuning.unmovable_irqs == "accept"
        tuning = Toggle(cpu_partitioning(isolated), accept_unmovable=accept, report=progress)
        progress.step(
            f"pvp: windows alternate untuned and tuned ({lab.tuning.profile}, CPUs "
            f"{','.join(map(str, isolated))} isolated)"
        )
    if "L0" in levels and pvp.loopback:
        at("L0", "host", WORKLOAD)
        lab_dir = LabDir.of(lab.name)
        with lab_dir.locked():  # no kvmlab up of this lab meanwhile
            labrun.clean_stale(lab_dir)  # refuses when the lab is up; a killed run's switch goes
            try:
                store(loopback(lab.name, spec, pvp, lab_dir.root, variant, reps, progress, tuning))
            finally:
                lab_dir.clear()
                lab_dir.remove()
    guest = pvp_guest(loaded)
    if "L1" not in levels or guest is None:
        return
    at("L1", guest, WORKLOAD)
    with labrun.started(loaded, launch, start_inner=False) as machines:
        machine = next(m for m in machines if m.config.address == (guest,))
        lab_dir = LabDir.of(lab.name)
        sw = Switch.attached(lab.name, spec, lab_dir.root / SWITCH_DIR)
        nics = switch_ports(lab.guests[guest])[:2]
        ports = (nics[0][1].port or "", nics[1][1].port or "")
        macs = [n.mac or derived_mac(lab.name, (guest,), i) for i, n in nics]
        vm = GuestTestPmd(machine)
        progress.step(
            f"{lab.name}/{guest}: binding {', '.join(macs)} to uio_pci_generic, "
            "starting testpmd (macswap)"
        )
        pci = vm.bind(macs)
        if len(pci) != 2:
            raise StateError(f"{lab.name}/{guest}: expected two NICs bound, got {pci}")
        argv = guest_argv(pci, machine.config.vcpus, spec.queues)
        vm.start(argv)
        ids = vm.port_ids(macs)
        work = create_owned(lab_dir.root / TRAFFIC_DIR, f"pvp traffic of lab {lab.name}")
        try:
            with traffic(
                f"kvmlab-{lab.name}",
                sw.socket(GEN_PORT),
                sw.socket(SINK_PORT),
                traffic_cores(spec),
                work,
                pvp.multi_flow,
                server=not sw.serves_sockets,
            ) as (gen, sink):
                counted = [gen, SwitchCounted(sw), vm, sink]
                where = Where(
                    variant,
                    guest,
                    "L1",
                    machine.config.accel,
                    describe(spec, pvp, guest),
                    len(spec.cores),
                )
                store(
                    measure(
                        gen,
                        counted,
                        pvp_hops(lab_ports(lab), ports, (ids[0], ids[1])),
                        pvp.frame_sizes,
                        pvp.warmup,
                        pvp.seconds,
                        reps,
                        where,
                        progress,
                        tuning,
                    )
                )
        finally:
            # testpmd in the guest is not quit first: the guest is stopped next (leaving
            # this block), which ends it with everything else, while quitting it under TCG
            # (ports closed, huge pages freed by a guest whose vCPUs it keeps busy) took 25 s.
            remove_owned(work)
