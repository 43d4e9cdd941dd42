"""The guest clock and timers (libvirt ``<clock>``; QEMU -rtc, -machine, -global, -cpu)."""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.argv import QemuArgs, opts
from kvmlab.render.target import Accel
from kvmlab.render.xmldom import DomainXml, sub
from kvmlab.spec import Guest

TIMER_NAMES = ("rtc", "pit", "hpet", "kvmclock", "hypervclock")


@dataclass(frozen=True)
class ClockPart:
    """Offset and timers, spelled for QEMU and for libvirt."""

    guest: Guest
    accel: Accel

    def qemu(self, q: QemuArgs) -> None:
        clock = self.guest.clock
        timers = clock.timers
        driftfix = "slew" if timers.rtc.tickpolicy == "catchup" else None
        q.add("-rtc", opts("", base=clock.offset, driftfix=driftfix))
        if q.machine != "microvm":
            if timers.hpet.present is not None:
                q.machine_props["hpet"] = timers.hpet.present
            if timers.pit.present is not None:
                q.machine_props["pit"] = timers.pit.present
        if timers.pit.tickpolicy is not None:
            if self.accel == "kvm":
                q.add("-global", f"kvm-pit.lost_tick_policy={timers.pit.tickpolicy}")
            else:
                q.note("pit tickpolicy applies to KVM's in-kernel PIT; not used under TCG")
        if timers.kvmclock.present is not None:
            if self.accel == "kvm":
                q.cpu_props.append(f"kvmclock={'on' if timers.kvmclock.present else 'off'}")
            else:
                q.note("kvmclock is a KVM paravirtual clock; not used under TCG")
        if timers.hypervclock.present:
            q.cpu_props.append("hv-time=on")

    def xml(self, d: DomainXml) -> None:
        clock = self.guest.clock
        el = d.section("clock", offset=clock.offset)
        for name in TIMER_NAMES:
            timer = getattr(clock.timers, name)
            if timer.present is None and timer.tickpolicy is None:
                continue
            present = None if timer.present is None else ("yes" if timer.present else "no")
            sub(el, "timer", name=name, tickpolicy=timer.tickpolicy, present=present)
