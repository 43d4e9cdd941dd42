"""Tool checks: QEMU, libvirt, DPDK, OVS, fio, iperf3, perf, sysbench, with versions.

Install commands use Debian 12 package names. ``dpdk-testpmd`` is never run (its EAL
would start initialising hugepages); its version comes from pkg-config or dpkg.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kvmlab.host.findings import Finding, Status, finding
from kvmlab.host.probe import CommandResult, HostProbe

OVS_DPDK = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
DOTTED = r"(\d+\.\d+(?:\.\d+)?)"
SYSTEM_URI = "qemu:///system"


def apt_install(*packages: str) -> str:
    return f"apt-get install -y {' '.join(packages)}"


def version_of(result: CommandResult, pattern: str) -> str:
    """The first group of ``pattern`` in the output, else the first output line."""
    match = re.search(pattern, result.output, re.MULTILINE)
    return match.group(1).strip() if match else result.first_line


def _broken(check_id: str, result: CommandResult, package: str) -> Finding:
    rc = "timed out" if result.returncode is None else f"exit {result.returncode}"
    return finding(
        check_id,
        Status.WARN,
        f"{result.argv[0]} is installed but `{result.command}` failed ({rc})",
        [(result.command, result.first_line or rc)],
        [apt_install("--reinstall", package)],
    )


def simple_tool(
    check_id: str,
    argv: tuple[str, ...],
    pattern: str,
    name: str,
    package: str,
    missing: Status = Status.INFO,
    use: str = "",
) -> Callable[[HostProbe], Finding]:
    """A check that runs ``argv``: OK with the version, ``missing`` with the install command."""

    def check(probe: HostProbe) -> Finding:
        result = probe.run(argv)
        if not result.found:
            return finding(
                check_id,
                missing,
                f"{argv[0]} not found{use}",
                [(result.command, "not found")],
                [apt_install(package)],
            )
        if not result.ok:
            return _broken(check_id, result, package)
        return finding(
            check_id,
            Status.OK,
            f"{name} {version_of(result, pattern)}",
            [(result.command, result.first_line)],
        )

    check.__name__ = f"check_{check_id.replace('.', '_')}"
    check.__doc__ = f"{name}: installed, and which version."
    return check


check_qemu = simple_tool(
    "tools.qemu",
    ("qemu-system-x86_64", "--version"),
    r"version\s+(.+)",
    "QEMU",
    "qemu-system-x86",
    missing=Status.FAIL,
    use=": kvmlab cannot start guests",
)
MIGRATION_MEASURED = {
    (7, 2): "broke the guest in {bad} of {runs} live migrations of a 2-vCPU TCG guest "
    "(every strategy; 1 vCPU: 0 of 25)",
    (10, 0): "kept the guest intact in {good} of {runs} live migrations of a 2-vCPU TCG guest "
    "(five strategies)",
}
"""QEMU versions kvmlab measured for live migration (2026-11-23, Debian 12 host, TCG,
`kvmlab migrate migrate`: 60 MiB/s dirtied over 128 MiB, precopy, auto,
postcopy, multifd, auto-converge, every run verified)."""
MIGRATION_RUNS = {
    (7, 2): {"bad": 15, "good": 0, "runs": 15},
    (10, 0): {"bad": 0, "good": 25, "runs": 25},
}
MIGRATION_SOURCE = "measured with kvmlab migrate migrate on Debian 12, 2026-11-23"
MIGRATION_SCOPE = "under KVM and for other versions: not measured"


def check_qemu_migration(probe: HostProbe) -> Finding:
    """What kvmlab measured of this QEMU version's live migration, scoped to what was
    measured (its version, TCG, the vCPU counts tried); elsewhere it says "not measured"."""
    result = probe.run(("qemu-system-x86_64", "--version"))
    if not result.found or not result.ok:
        return finding(
            "tools.qemu_migration",
            Status.INFO,
            "no working QEMU to judge",
            [(result.command, result.first_line or "not found")],
        )
    match = re.search(r"version\s+(\d+)\.(\d+)", result.output)
    evidence = [(result.command, result.first_line)]
    if match is None:
        return finding("tools.qemu_migration", Status.INFO, "QEMU version not recognised", evidence)
    version = (int(match.group(1)), int(match.group(2)))
    runs = MIGRATION_RUNS.get(version)
    shown = f"QEMU {version[0]}.{version[1]}"
    if runs is None:
        return finding(
            "tools.qemu_migration",
            Status.INFO,
            f"{shown}: live migration not measured by kvmlab (7.2 and 10.0 were, "
            f"under TCG); kvmlab migrate verifies each migration",
            evidence,
        )
    said = MIGRATION_MEASURED[version].format(**runs)
    summary = f"{shown} {said} ({MIGRATION_SOURCE}; {MIGRATION_SCOPE})"
    if runs["bad"]:
        return finding(
            "tools.qemu_migration",
            Status.WARN,
            f"{summary}; kvmlab migrate reports such a run as FAILED",
            evidence,
            [
                "make qemu10   # QEMU 10.0 unpacked in /opt/kvmlab-qemu10, the host's stays",
                'qemu = "/opt/kvmlab-qemu10/qemu-system-x86_64"   # per guest, in the lab file',
            ],
        )
    return finding("tools.qemu_migration", Status.OK, summary, evidence)


check_fio = simple_tool(
    "tools.fio", ("fio", "--version"), r"fio-(\S+)", "fio", "fio", use=" (disk benchmarks)"
)
check_iperf3 = simple_tool(
    "tools.iperf3",
    ("iperf3", "--version"),
    r"iperf\s+(\S+)",
    "iperf3",
    "iperf3",
    use=" (network benchmarks)",
)
check_perf = simple_tool(
    "tools.perf",
    ("perf", "--version"),
    r"perf version\s+(\S+)",
    "perf",
    "linux-perf",
    use=" (perf kvm stat: VM-exit profiles)",
)
check_sysbench = simple_tool(
    "tools.sysbench",
    ("sysbench", "--version"),
    r"sysbench\s+(\S+)",
    "sysbench",
    "sysbench",
    use=" (CPU and memory benchmarks)",
)
check_stress_ng = simple_tool(
    "tools.stress-ng",
    ("stress-ng", "--version"),
    r"stress-ng, version\s+(\S+)",
    "stress-ng",
    "stress-ng",
    use=" (the fork benchmark)",
)


def check_libvirt(probe: HostProbe) -> Finding:
    """libvirt: the virsh client and the libvirtd daemon."""
    virsh = probe.run(("virsh", "--version"))
    daemon = probe.run(("libvirtd", "--version"))
    evidence = [(r.command, r.first_line if r.found else "not found") for r in (virsh, daemon)]
    if virsh.ok and daemon.ok:
        answer = probe.run(("virsh", "-c", SYSTEM_URI, "version"), timeout=10.0)
        evidence.append((answer.command, answer.first_line if answer.found else "not found"))
        if answer.ok:
            return finding(
                "tools.libvirt",
                Status.OK,
                f"libvirt {version_of(daemon, DOTTED)}, a daemon answers on {SYSTEM_URI}",
                evidence,
            )
        return finding(
            "tools.libvirt",
            Status.INFO,
            f"libvirt {version_of(daemon, DOTTED)}, but no daemon answers on {SYSTEM_URI} "
            "(the libvirt backend needs one; kvmlab never starts the system daemon)",
            evidence,
            [
                "systemctl start libvirtd (without systemd: virtlogd -d && libvirtd -d)",
                "or a private daemon: kvmlab libvirtd start NAME (then --connect its URI)",
            ],
        )
    if virsh.found and not virsh.ok:
        return _broken("tools.libvirt", virsh, "libvirt-clients")
    if virsh.ok:
        return finding(
            "tools.libvirt",
            Status.INFO,
            f"virsh {version_of(virsh, DOTTED)} found, libvirtd missing "
            "(virsh can only reach remote daemons)",
            evidence,
            [apt_install("libvirt-daemon-system")],
        )
    return finding(
        "tools.libvirt",
        Status.INFO,
        "libvirt not found (libvirt domains and virsh migrations unavailable)",
        evidence,
        [apt_install("libvirt-daemon-system", "libvirt-clients")],
    )


def check_dpdk(probe: HostProbe) -> Finding:
    """DPDK: dpdk-testpmd (Debian package dpdk-dev) and the DPDK version."""
    testpmd = probe.which("dpdk-testpmd")
    if testpmd is None:
        return finding(
            "tools.dpdk",
            Status.INFO,
            "dpdk-testpmd not found (vhost-user vswitch and PVP labs)",
            [("command -v dpdk-testpmd", "not found")],
            [apt_install("dpdk-dev")],
        )
    evidence = [("command -v dpdk-testpmd", testpmd)]
    for argv in (
        ("pkg-config", "--modversion", "libdpdk"),
        ("dpkg-query", "-W", "-f=${Version}", "dpdk-dev"),
    ):
        result = probe.run(argv)
        if result.ok and result.first_line:
            evidence.append((result.command, result.first_line))
            return finding("tools.dpdk", Status.OK, f"DPDK {result.first_line}", evidence)
    return finding("tools.dpdk", Status.OK, "DPDK (version unknown)", evidence)


def check_ovs(probe: HostProbe) -> Finding:
    """Open vSwitch, and whether its DPDK build (openvswitch-switch-dpdk) is installed."""
    plain = probe.run(("ovs-vswitchd", "--version"))
    dpdk = probe.run((OVS_DPDK, "--version"))
    evidence = [
        (r.command, " / ".join(r.output.strip().splitlines()[:2]) if r.found else "not found")
        for r in (plain, dpdk)
    ]
    ovs_version = r"Open vSwitch\)\s+(\S+)"
    if dpdk.ok:
        with_dpdk = version_of(dpdk, r"^(DPDK\s+\S+)") if "DPDK" in dpdk.output else "DPDK"
        return finding(
            "tools.ovs",
            Status.OK,
            f"Open vSwitch {version_of(dpdk, ovs_version)} with {with_dpdk}",
            evidence,
        )
    if plain.ok:
        return finding(
            "tools.ovs",
            Status.INFO,
            f"Open vSwitch {version_of(plain, ovs_version)} without its DPDK build",
            evidence,
            [apt_install("openvswitch-switch-dpdk")],
        )
    return finding(
        "tools.ovs",
        Status.INFO,
        "Open vSwitch not found (OVS-DPDK vhost-user labs)",
        evidence,
        [apt_install("openvswitch-switch-dpdk")],
    )


TOOL_CHECKS: tuple[Callable[[HostProbe], Finding], ...] = (
    check_qemu,
    check_qemu_migration,
    check_libvirt,
    check_dpdk,
    check_ovs,
    check_fio,
    check_iperf3,
    check_perf,
    check_sysbench,
    check_stress_ng,
)
