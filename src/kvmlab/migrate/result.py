"""What one migration did: QEMU's statistics, the guest's downtime, the verification."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvmlab import __version__
from kvmlab.jsondoc import schema_of
from kvmlab.migrate.guestside import Check
from kvmlab.migrate.pages import PageCompare
from kvmlab.migrate.pathprobe import HopCount, hop_losses
from kvmlab.migrate.stats import Sample, info_migrate, passes


@dataclass
class BackendJob:
    """The backend's own account of the migration job, beside QEMU's ``query-migrate``
    (libvirt: its job statistics, what ``virsh domjobinfo`` prints); empty when the backend
    keeps none (kvmlab's own QEMU)."""

    completed: dict[str, float] | None = None
    """The completed job's statistics (``virsh domjobinfo --completed``)."""
    samples: list[dict[str, float]] = field(default_factory=list)
    """The job's statistics polled during the migration (``t`` in s since its start)."""


@dataclass
class Outcome:
    """A migration from start to verdict. ``verified`` is the headline: a migration QEMU
    calls completed whose guest fails any check is ``FAILED``, never a success."""

    address: str
    plan: str
    status: str = "none"
    samples: list[Sample] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    checks_before: list[Check] = field(default_factory=list)
    checks_after: list[Check] = field(default_factory=list)
    source_checks: list[Check] = field(default_factory=list)
    """The source after a migration that did not complete (it must still be intact)."""
    source_resumed: bool = False
    lost: bool = False
    """Postcopy failed: the guest's memory was split between the two QEMUs, nothing runs it."""
    guest_downtime_ms: float | None = None
    """Longest gap between the guest's heartbeats around the switch-over, on the host clock."""
    baseline_gap_ms: float | None = None
    """The same measure over a second before the migration (scheduling noise)."""
    guest_clock_gap_ms: float | None = None
    """Longest gap the dirtier saw in its own progress, by the guest's clock."""
    network_downtime_ms: float | None = None
    """Longest gap between echoes of the network probe (UDP at 1 kHz from the host through
    the guest's port forward) around the switch-over, until they came steadily again."""
    network_baseline_gap_ms: float | None = None
    """The same over a second before the migration (the probe path's own noise)."""
    network_probes: tuple[int, int] | None = None
    """Probes sent in that window, and how many of them never came back."""
    network_path: str | None = None
    """Where the probes went (``udp 127.0.0.1:P -> guest port 7777, via the user-network
    forward``), or why there was no probe."""
    packet_downtime_ms: float | None = None
    """Longest gap between echoes of the packet-path probe (UDP at 1 kHz through the
    guest's vswitch port) around the switch-over."""
    packet_baseline_gap_ms: float | None = None
    packet_probes: tuple[int, int] | None = None
    """Packet-path probes sent from the migration's start, and how many never came back."""
    packet_path: str | None = None
    """The packet path probed, or why it was not."""
    packet_hops: list[tuple[str, int]] = field(default_factory=list)
    """Packets each hop of that path counted over the probe's whole run, in path order."""
    packet_not_measured: str | None = None
    """Why the packet path's gap and loss are not the guest's (a part of the probe's own
    failed while probing): they are then left out, and the hops say where it failed."""
    dirty_mib: int = 0
    dirty_rate_mibs: float = 0.0
    dirty_seen_mibs: float | None = None
    """The rate the dirtier actually reached before the migration (MiB/s)."""
    postcopy_started: float | None = None
    raw_last: dict[str, Any] | None = None
    """QEMU's last ``query-migrate`` reply as it came (for the record and the tests)."""
    choice: str | None = None
    """``auto``: what kvmlab chose and why."""
    cancelled: str | None = None
    interrupted: bool = False
    """Ctrl-C (SIGTERM, SIGHUP) ended it: the caller's run ends too (exit 130)."""
    error: str | None = None
    source_qemu: str = ""
    dest_qemu: str = ""
    wall_seconds: float = 0.0
    verify_seconds: float = 0.0
    pages: PageCompare | None = None
    """``--compare-pages``: every page of guest RAM on both sides at the switch-over."""
    backend_job: BackendJob = field(default_factory=BackendJob)
    """The backend's own account of the job (what is backend-specific of the outcome)."""

    @property
    def final(self) -> Sample | None:
        """The last ``query-migrate`` sample."""
        return self.samples[-1] if self.samples else None

    @property
    def verified(self) -> bool:
        """Completed, and every check after the switch-over passed."""
        return (
            self.status == "completed"
            and bool(self.checks_after)
            and all(c.ok for c in self.checks_after)
        )

    @property
    def verdict(self) -> str:
        """``VERIFIED``, ``FAILED`` (completed but the guest is not intact, or failed) or
        ``CANCELLED`` (the source kept running)."""
        if self.verified:
            return "VERIFIED"
        if self.status == "cancelled":
            return "CANCELLED"
        return "FAILED"

    def to_json(self) -> dict[str, Any]:
        """The outcome as ``-o json`` prints it (schema in docs/json-output.md)."""
        final = self.final
        return {
            "schema": schema_of("migration"),
            "kvmlab": __version__,
            "address": self.address,
            "plan": self.plan,
            "status": self.status,
            "verdict": self.verdict,
            "error": self.error,
            "cancelled": self.cancelled,
            "interrupted": self.interrupted,
            "qemu": {"source": self.source_qemu, "destination": self.dest_qemu},
            "final": final.to_json() if final else None,
            "guest_downtime_ms": self.guest_downtime_ms,
            "baseline_gap_ms": self.baseline_gap_ms,
            "guest_clock_gap_ms": self.guest_clock_gap_ms,
            "network": {
                "downtime_ms": self.network_downtime_ms,
                "baseline_gap_ms": self.network_baseline_gap_ms,
                "probes_sent": self.network_probes[0] if self.network_probes else None,
                "probes_lost": self.network_probes[1] if self.network_probes else None,
                "path": self.network_path,
            },
            "packet_path": {
                "downtime_ms": self.packet_downtime_ms,
                "baseline_gap_ms": self.packet_baseline_gap_ms,
                "probes_sent": self.packet_probes[0] if self.packet_probes else None,
                "probes_lost": self.packet_probes[1] if self.packet_probes else None,
                "path": self.packet_path,
                "not_measured": self.packet_not_measured,
                "hops": [{"hop": name, "packets": n} for name, n in self.packet_hops],
            },
            "dirty": {
                "mib": self.dirty_mib,
                "rate_mibs": self.dirty_rate_mibs,
                "seen_mibs": self.dirty_seen_mibs,
            },
            "postcopy_started_s": self.postcopy_started,
            "choice": self.choice,
            "passes": passes(self.samples),
            "events": self.events,
            "checks": {
                "before": [asdict(c) for c in self.checks_before],
                "after": [asdict(c) for c in self.checks_after],
                "source": [asdict(c) for c in self.source_checks],
            },
            "source_resumed": self.source_resumed,
            "lost": self.lost,
            "pages": self.pages.to_json() if self.pages is not None else None,
            "wall_seconds": self.wall_seconds,
            "verify_seconds": self.verify_seconds,
            "samples": [s.to_json() for s in self.samples],
            "query_migrate": self.raw_last,
            "libvirt_job": self.backend_job.completed,
            "libvirt_samples": self.backend_job.samples,
        }


def text(outcome: Outcome) -> list[str]:
    """The networking course lab's ``info migrate`` table, then the guest's view and the
    verification."""
    lines = [f"migration of {outcome.address}: {outcome.plan}"]
    if outcome.source_qemu != outcome.dest_qemu:
        lines.append(f"  from {outcome.source_qemu} to {outcome.dest_qemu}")
    if outcome.final is not None:
        lines += [f"  {line}" for line in info_migrate(outcome.final)]
    if outcome.backend_job.completed:
        from kvmlab.migrate.jobinfo import domjobinfo

        lines.append("  libvirt's job statistics (virsh domjobinfo --completed):")
        lines += [f"    {line}" for line in domjobinfo(outcome.backend_job.completed)]
    for p in passes(outcome.samples):
        lines.append(
            f"  pass {p['pass']:.0f}: from {p['start']:.1f} s, "
            f"{p['bytes'] / 1048576:.1f} MiB in {p['seconds']:.1f} s, "
            f"dirty rate {p['dirty-pages-rate']:.0f} pages/s"
        )
    if outcome.postcopy_started is not None:
        lines.append(f"  postcopy started at {outcome.postcopy_started:.1f} s")
    if outcome.choice:
        lines.append(f"  auto: {outcome.choice}")
    rate = outcome.dirty_seen_mibs
    seen = "" if rate is None else f", {rate:.1f} MiB/s reached"
    lines.append(
        f"dirtying: {outcome.dirty_mib} MiB working set at "
        f"{outcome.dirty_rate_mibs:g} MiB/s (0 = as fast as it can){seen}"
    )
    if outcome.guest_downtime_ms is not None:
        noise = outcome.baseline_gap_ms
        base = "" if noise is None else f" (heartbeat noise before the migration: {noise:.0f} ms)"
        lines.append(
            f"guest downtime (heartbeats, host clock): {outcome.guest_downtime_ms:.0f} ms{base}"
        )
    if outcome.network_downtime_ms is not None and outcome.network_probes is not None:
        sent, lost = outcome.network_probes
        noise = outcome.network_baseline_gap_ms
        base = "" if noise is None else f"; its noise before the migration: {noise:.0f} ms"
        lines.append(
            f"network downtime (UDP probes at 1 kHz, {outcome.network_path}): "
            f"{outcome.network_downtime_ms:.0f} ms, {lost} of {sent} probes lost{base}"
        )
    elif outcome.network_path:
        lines.append(f"network downtime: not measured ({outcome.network_path})")
    lines += packet_path_lines(outcome)
    if outcome.guest_clock_gap_ms is not None:
        lines.append(f"longest stall by the guest's own clock: {outcome.guest_clock_gap_ms:.0f} ms")
    if outcome.pages is not None:
        lines.append(
            f"page comparison at the switch-over: {outcome.pages.pause_s:.1f} s with the guest "
            "paused (within the downtimes above)"
        )
    for when, checks in (
        ("before", outcome.checks_before),
        ("after", outcome.checks_after),
        ("source", outcome.source_checks),
    ):
        for c in checks:
            lines.append(f"  check {when:6} {'ok  ' if c.ok else 'FAIL'} {c.name}: {c.evidence}")
    if outcome.lost:
        lines.append(
            "the guest is lost: postcopy failed after the switch-over; the paused "
            "source is left for 'kvmlab down'"
        )
    if outcome.source_resumed:
        lines.append("the source was resumed: the guest runs where it was")
    if outcome.cancelled:
        lines.append(f"cancelled: {outcome.cancelled}")
    if outcome.error:
        lines.append(f"error: {outcome.error}")
    lines.append(
        f"verdict: {outcome.verdict} ({outcome.wall_seconds:.1f} s in all, "
        f"verification {outcome.verify_seconds:.1f} s outside the migration)"
    )
    return lines


def packet_path_lines(outcome: Outcome) -> list[str]:
    """The packet path's gap and loss, then every hop's count and what it lost against the
    hop before (at 1 kHz a lost probe is a millisecond of the path's time)."""
    if not outcome.packet_path:
        return []
    if outcome.packet_downtime_ms is None or outcome.packet_probes is None:
        if "not probed" in outcome.packet_path and not outcome.packet_hops:
            return [f"packet path: {outcome.packet_path}"]
        why = outcome.packet_not_measured or (
            "interrupted before it was measured"
            if outcome.interrupted
            else "the migration did not complete"
        )
        lines = [f"packet path: {outcome.packet_path}: gap and loss not measured ({why})"]
    else:
        sent, lost = outcome.packet_probes
        noise = outcome.packet_baseline_gap_ms
        base = "" if noise is None else f"; its noise before the migration: {noise:.0f} ms"
        lines = [
            f"packet-path downtime (UDP probes at 1 kHz, {outcome.packet_path}): "
            f"{outcome.packet_downtime_ms:.0f} ms, {lost} of {sent} probes lost ({lost} ms of "
            f"probes){base}"
        ]
    if outcome.packet_hops:
        lines.append(
            "  packets at every hop over the probe's run (fewer than the hop before: lost there)"
        )
        hops = [HopCount(name, n) for name, n in outcome.packet_hops]
        width = max(len(h.name) for h in hops)
        for hop, lost, others in hop_losses(hops):
            notes = []
            if lost:
                notes.append(f"{lost} probes lost here ({lost} ms at 1 kHz)")
            if others > 0:
                notes.append(f"{others} frames that are not probes joined (announcements, ARP)")
            elif others < 0:
                notes.append(
                    f"{-others} fewer: frames that are not probes ended here (or probes "
                    "were lost, as many)"
                )
            note = f"  {'; '.join(notes)}" if notes else ""
            lines.append(f"    {hop.name:<{width}}  {hop.packets:>9}{note}")
    return lines
