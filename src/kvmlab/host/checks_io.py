"""I/O and tracing checks: IOMMU, /dev/net/tun, /dev/vhost-net, tracefs kvm events."""

from __future__ import annotations

from kvmlab.host import facts
from kvmlab.host.findings import Finding, Status, finding
from kvmlab.host.probe import HostProbe

IOMMU_CLASS = "/sys/class/iommu"
DEV_TUN = "/dev/net/tun"
DEV_VHOST_NET = "/dev/vhost-net"
FILESYSTEMS = "/proc/filesystems"
TRACEFS = "/sys/kernel/tracing"
IOMMU_PARAMS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough")
GRUB_HINT = "# kernel cmdline: add to GRUB_CMDLINE_LINUX in /etc/default/grub, update-grub, reboot"
PVM_EVENTS = "kvm_pio, kvm_userspace_exit, kvm_emulate_insn"


def check_iommu(probe: HostProbe) -> Finding:
    """IOMMU for VFIO device assignment: kernel parameters and registered IOMMU units."""
    params = facts.cmdline_params(probe)
    asked = {k: params[k] for k in IOMMU_PARAMS if k in params}
    units = probe.listdir(IOMMU_CLASS)
    evidence = [
        (facts.CMDLINE, " ".join(f"{k}={v}" for k, v in asked.items()) or "no iommu parameters"),
        (IOMMU_CLASS, ", ".join(units) or "empty"),
    ]
    passthrough = asked.get("iommu") == "pt" or facts.is_on(asked.get("iommu.passthrough")) is True
    if units:
        mode = "passthrough for host devices (iommu=pt)" if passthrough else "translated mode"
        return finding(
            "io.iommu", Status.OK, f"IOMMU active ({', '.join(units)}), {mode}", evidence
        )
    cpu = facts.cpu_info(probe)
    amd = cpu is not None and cpu.is_amd
    fix = ["iommu=pt" if amd else "intel_iommu=on iommu=pt"]
    fix[0] += f"   {GRUB_HINT}"
    if "off" in (asked.get("intel_iommu"), asked.get("amd_iommu"), asked.get("iommu")):
        return finding(
            "io.iommu", Status.INFO, "IOMMU disabled on the kernel command line", evidence, fix
        )
    if cpu is not None and cpu.under_hypervisor:
        return finding(
            "io.iommu",
            Status.INFO,
            "no IOMMU in this VM (needs a vIOMMU from the host); VFIO assignment unavailable",
            evidence,
        )
    if asked.get("intel_iommu", "").startswith("on") or "amd_iommu" in asked:
        return finding(
            "io.iommu",
            Status.WARN,
            "IOMMU asked for on the command line but none registered: enable VT-d / AMD-Vi "
            "in the firmware setup",
            evidence,
        )
    firmware = " and AMD-Vi in the firmware" if amd else ""
    return finding(
        "io.iommu",
        Status.INFO,
        f"no IOMMU: VFIO device assignment unavailable (enable it on the cmdline{firmware})",
        evidence,
        fix,
    )


def _modules_disabled(probe: HostProbe) -> bool:
    return "nomodule" in facts.cmdline_params(probe)


def check_tun(probe: HostProbe) -> Finding:
    """/dev/net/tun, needed for tap networking (user-mode networking works without)."""
    if probe.exists(DEV_TUN):
        return finding(
            "io.tun", Status.OK, "/dev/net/tun present (tap networking)", [(DEV_TUN, "present")]
        )
    return finding(
        "io.tun",
        Status.WARN,
        "/dev/net/tun missing: no tap networking (user-mode networking still works)",
        [(DEV_TUN, "missing")],
        ["modprobe tun", "mkdir -p /dev/net && mknod /dev/net/tun c 10 200"],
    )


def check_vhost_net(probe: HostProbe) -> Finding:
    """/dev/vhost-net: the in-kernel virtio-net data path."""
    if probe.exists(DEV_VHOST_NET):
        return finding(
            "io.vhost_net",
            Status.OK,
            "/dev/vhost-net present (vhost=on works)",
            [(DEV_VHOST_NET, "present")],
        )
    evidence = [(DEV_VHOST_NET, "missing")]
    if _modules_disabled(probe):
        evidence.append((facts.CMDLINE, "nomodule"))
        return finding(
            "io.vhost_net",
            Status.INFO,
            "/dev/vhost-net missing and the kernel forbids loading modules (nomodule): "
            "virtio-net runs in QEMU userspace",
            evidence,
        )
    return finding(
        "io.vhost_net",
        Status.WARN,
        "/dev/vhost-net missing: virtio-net runs in QEMU userspace (slower)",
        evidence,
        ["modprobe vhost_net"],
    )


def tracing_dir(probe: HostProbe) -> str | None:
    """Where tracefs can be read: a tracefs mount, else debugfs's tracing directory."""
    mounted = facts.mounts(probe)
    targets = [m.target for m in mounted if m.fstype == "tracefs"]
    if targets:
        return TRACEFS if TRACEFS in targets else targets[0]
    debugfs = next((m.target for m in mounted if m.fstype == "debugfs"), None)
    if debugfs is not None and probe.is_dir(f"{debugfs}/tracing/events"):
        return f"{debugfs}/tracing"
    return None


def check_tracing(probe: HostProbe) -> Finding:
    """Kernel tracing of KVM events, for VM-exit profiles (kvm_exit, ...)."""
    flavour = facts.kvm_flavour(probe)
    pvm_note = (
        f"; under kvm_pvm kvm_exit/kvm_entry never fire, profiles use {PVM_EVENTS}"
        if flavour == "kvm_pvm"
        else ""
    )
    where = tracing_dir(probe)
    if where is None:
        has_tracefs = "tracefs" in (probe.read(FILESYSTEMS) or "").split()
        evidence = [
            (facts.MOUNTS, "no tracefs or debugfs mounted"),
            (FILESYSTEMS, "tracefs" if has_tracefs else "no tracefs"),
        ]
        if not has_tracefs:
            return finding(
                "trace.kvm", Status.WARN, "kernel has no tracefs: no VM-exit tracing", evidence
            )
        return finding(
            "trace.kvm",
            Status.WARN,
            f"tracefs not mounted: no VM-exit tracing until it is{pvm_note}",
            evidence,
            [f"mount -t tracefs nodev {TRACEFS}"],
        )
    evidence = [(facts.MOUNTS, f"tracing at {where}")]
    if probe.state(where) == "denied":
        return finding("trace.kvm", Status.WARN, f"{where} is not readable: run as root", evidence)
    events_dir = f"{where}/events/kvm"
    events = [e for e in probe.listdir(events_dir) if e not in ("enable", "filter")]
    if not events:
        evidence.append((events_dir, "missing"))
        status = Status.INFO if flavour == "none" else Status.WARN
        return finding("trace.kvm", status, f"no kvm trace events under {events_dir}", evidence)
    has_exit = "kvm_exit" in events
    hist_path = f"{events_dir}/{'kvm_exit' if has_exit else events[0]}/hist"
    evidence += [
        (events_dir, f"{len(events)} events, kvm_exit {'present' if has_exit else 'absent'}"),
        (hist_path, "present" if probe.exists(hist_path) else "absent (no hist triggers)"),
    ]
    if flavour == "kvm_pvm":
        return finding("trace.kvm", Status.INFO, f"tracefs at {where}{pvm_note}", evidence)
    if not has_exit:
        return finding(
            "trace.kvm", Status.WARN, f"tracefs at {where} but no kvm_exit event", evidence
        )
    return finding(
        "trace.kvm",
        Status.OK,
        f"tracefs at {where} with kvm_exit: VM-exit profiling works",
        evidence,
    )
