"""Run every host check, in a fixed order, against a live host or a recorded tree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kvmlab.host import checks_cpu, checks_io, checks_kvm, checks_memory, checks_tools
from kvmlab.host.findings import Evidence, Finding, Status, finding
from kvmlab.host.probe import HostProbe

Check = Callable[[HostProbe], Finding]

NESTED_CHECKS: tuple[Check, ...] = (
    checks_cpu.check_cpu_virt,
    checks_kvm.check_dev_kvm,
    checks_kvm.check_flavour,
    checks_kvm.check_nested,
    checks_kvm.check_ept_npt,
    checks_kvm.check_shadow_vmcs,
)
"""What decides whether guest hypervisors (L1) can run their guests (L2) with KVM."""

CHECKS: tuple[Check, ...] = (
    checks_cpu.check_cpu_vendor,
    *NESTED_CHECKS,
    checks_kvm.check_apic_virt,
    checks_kvm.check_unrestricted_guest,
    checks_memory.check_hugepages_2m,
    checks_memory.check_hugepages_1g,
    checks_cpu.check_cpu_isolation,
    checks_cpu.check_nmi_watchdog,
    checks_io.check_iommu,
    checks_io.check_tun,
    checks_io.check_vhost_net,
    checks_io.check_tracing,
    *checks_tools.TOOL_CHECKS,
)


def run_check(check: Check, probe: HostProbe) -> Finding:
    """Run one check; a host that answers oddly (OSError, bad value) gives a WARN, not a crash.

    A file the check found unreadable (a FIFO, a device, larger than the probe reads: see
    :func:`kvmlab.host.probe.read_bounded`) is named in its finding with the reason, and
    the finding is at least a WARN: what the check concluded without it is not trusted."""
    probe.met_unreadable.clear()
    try:
        found = check(probe)
    except (OSError, ValueError) as exc:
        name = check.__name__.removeprefix("check_")
        found = finding(f"error.{name}", Status.WARN, f"check {name} could not run: {exc}")
    return with_unreadable(found, dict(probe.met_unreadable))


def with_unreadable(found: Finding, unreadable: dict[str, str]) -> Finding:
    """``found`` naming each file in ``unreadable`` (host path: why) as unreadable."""
    if not unreadable:
        return found
    evidence = list(found.evidence)
    summary = found.summary
    for path, why in unreadable.items():
        value = f"unreadable: {why}"
        at = [i for i, e in enumerate(evidence) if e.source == path]
        for i in at:
            evidence[i] = Evidence(path, value)
        if not at:
            evidence.append(Evidence(path, value))
        if path not in summary:
            summary = f"{summary}; {path} is unreadable ({why})"
    status = found.status if found.status in (Status.FAIL, Status.WARN) else Status.WARN
    return replace(found, status=status, summary=summary, evidence=tuple(evidence))


def run_checks(
    root: Path = Path("/"), probe: HostProbe | None = None, checks: tuple[Check, ...] = CHECKS
) -> list[Finding]:
    """The host findings of ``checks`` (all of them by default), in display order.

    ``root`` is ``/`` for this host or a recorded tree; pass ``probe`` to share one
    (and its cache) with :func:`kvmlab.host.accel.choose_accel`.
    """
    probe = probe if probe is not None else HostProbe(root)
    return [run_check(check, probe) for check in checks]
