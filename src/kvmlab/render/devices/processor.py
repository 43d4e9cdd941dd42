"""The CPU: model, features, topology, Hyper-V enlightenments, vCPU pinning."""

from __future__ import annotations

from dataclasses import dataclass

from kvmlab.render.argv import QemuArgs
from kvmlab.render.target import Accel
from kvmlab.render.xmldom import DomainXml, sub
from kvmlab.spec import Guest
from kvmlab.spec.units import format_cpuset

# QEMU's property names for the enlightenments lab files name as libvirt does.
HV_QEMU = {
    "relaxed": "hv-relaxed",
    "vapic": "hv-vapic",
    "spinlocks": "hv-spinlocks",
    "vpindex": "hv-vpindex",
    "runtime": "hv-runtime",
    "synic": "hv-synic",
    "stimer": "hv-stimer",
    "reset": "hv-reset",
    "frequencies": "hv-frequencies",
    "reenlightenment": "hv-reenlightenment",
    "tlbflush": "hv-tlbflush",
    "ipi": "hv-ipi",
    "evmcs": "hv-evmcs",
}

TCG_LACKS_HV = ("vpindex",)
TCG_VPINDEX_NOTE = (
    "hyperv vpindex dropped: QEMU under TCG cannot set the VP_INDEX MSR "
    '("kernel doesn\'t allow setting HyperV VP_INDEX")'
)


@dataclass(frozen=True)
class Processor:
    """``-cpu``/``-smp`` and libvirt ``<vcpu>``, ``<cpu>``, ``<features><hyperv>``."""

    guest: Guest
    accel: Accel
    virt_flag: str | None = None

    @property
    def exposed(self) -> str | None:
        """The flag added so a guest hypervisor with a named CPU model sees virtualization.

        Under TCG that is svm (TCG emulates AMD-V, not VT-x); under KVM the host's flag.
        """
        cpu = self.guest.cpu
        if not self.guest.nested or cpu.model in ("host-passthrough", "host-model", "max"):
            return None
        if any(f[1:] in ("vmx", "svm") for f in cpu.features):
            return None
        return "svm" if self.accel == "tcg" else self.virt_flag

    @property
    def hv_features(self) -> list[str]:
        """The enlightenments rendered: all requested, less those the accelerator lacks."""
        wanted = self.guest.hyperv.features if self.guest.hyperv else []
        return [f for f in wanted if not (self.accel == "tcg" and f in TCG_LACKS_HV)]

    @property
    def dropped_hv(self) -> bool:
        """Whether an enlightenment was dropped because TCG cannot provide it."""
        wanted = self.guest.hyperv.features if self.guest.hyperv else []
        return len(self.hv_features) != len(wanted)

    def qemu(self, q: QemuArgs) -> None:
        cpu = self.guest.cpu
        if cpu.model in ("host-passthrough", "host-model"):
            if self.accel == "kvm":
                q.cpu_model = "host"
                if cpu.model == "host-model":
                    q.note("cpu host-model is a libvirt expansion; QEMU alone runs -cpu host")
            else:
                q.cpu_model = "max"
                q.note(f"cpu {cpu.model} under TCG: QEMU's 'max' model (all TCG can emulate)")
        else:
            q.cpu_model = cpu.model
        if self.exposed:
            q.cpu_props.append(f"{self.exposed}=on")
            q.note(f"guest hypervisor with CPU model {cpu.model}: {self.exposed} added")
        for flag in cpu.features:
            name, on = flag[1:], flag[0] == "+"
            if self.accel == "tcg" and name == "vmx" and on:
                q.note("TCG does not emulate VMX: an L1 under TCG gets svm from -cpu max instead")
            q.cpu_props.append(f"{name}={'on' if on else 'off'}")
        hv = self.guest.hyperv
        if hv is not None:
            if self.dropped_hv:
                q.note(TCG_VPINDEX_NOTE)
            for feature in self.hv_features:
                prop = HV_QEMU[feature]
                if feature == "spinlocks":
                    q.cpu_props.append(f"{prop}={hex(hv.spinlock_retries)}")
                else:
                    q.cpu_props.append(f"{prop}=on")
        sockets, cores, threads = self.topology
        q.add("-smp", f"{self.guest.vcpus},sockets={sockets},cores={cores},threads={threads}")
        if self.guest.pinning.vcpus or self.guest.pinning.emulator:
            q.note(
                "QEMU has no pinning option: kvmlab pins vCPU and emulator threads at run "
                "time (sched_setaffinity on the threads query-cpus-fast reports)"
            )

    @property
    def topology(self) -> tuple[int, int, int]:
        """(sockets, cores, threads), always written out: without them QEMU 7.2 makes
        ``-smp N`` one socket of N cores and libvirt N sockets of one core, so the guest
        would see a different CPU under each backend. Unset: one socket of N cores."""
        cpu = self.guest.cpu
        if not cpu.topology_given:
            return 1, self.guest.vcpus, 1
        return cpu.sockets or 1, cpu.cores or 1, cpu.threads or 1

    def xml(self, d: DomainXml) -> None:
        g = self.guest
        d.section("vcpu", placement="static").text = str(g.vcpus)
        self._cputune(d)
        cpu = g.cpu
        if cpu.model == "host-passthrough" and self.accel == "tcg":
            el = d.section("cpu", mode="maximum", check="none", migratable="on")
        elif cpu.model == "host-passthrough":
            el = d.section("cpu", mode="host-passthrough", check="none", migratable="on")
        elif cpu.model == "host-model":
            el = d.section("cpu", mode="host-model", check="partial")
        else:
            el = d.section("cpu", mode="custom", match="exact", check="partial")
            sub(el, "model", cpu.model, fallback="forbid")
        sockets, cores, threads = self.topology
        sub(el, "topology", sockets=sockets, dies=1, cores=cores, threads=threads)
        if self.exposed:
            sub(el, "feature", policy="require", name=self.exposed)
        for flag in cpu.features:
            policy = "require" if flag[0] == "+" else "disable"
            sub(el, "feature", policy=policy, name=flag[1:])
        if g.hyperv is not None and g.machine != "microvm":
            if self.dropped_hv:
                d.note(TCG_VPINDEX_NOTE)
            hv = sub(d.section("features"), "hyperv", mode="custom")
            for feature in self.hv_features:
                extra = {"retries": g.hyperv.spinlock_retries} if feature == "spinlocks" else {}
                sub(hv, feature, state="on", **extra)

    def _cputune(self, d: DomainXml) -> None:
        pins = self.guest.pinning
        if not pins.vcpus and pins.emulator is None:
            return
        tune = d.section("cputune")
        for vcpu, cpus in sorted(pins.vcpus.items(), key=lambda kv: int(kv[0])):
            sub(tune, "vcpupin", vcpu=vcpu, cpuset=format_cpuset(cpus))
        if pins.emulator is not None:
            sub(tune, "emulatorpin", cpuset=format_cpuset(pins.emulator))
