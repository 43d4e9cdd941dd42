"""Providers' parsers on outputs recorded inside a real guest hypervisor (tests/exits/data:
the timer-storm lab's L2 under KVM inside a TCG L1, Debian 6.1 kernel, QEMU 7.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvmlab.exits import qstats, tracepoints
from kvmlab.exits.cputime import ThreadTimes, add_guest_side, cpu_window, proc_stat_busy
from kvmlab.exits.model import CpuWindow, Profile, from_json
from kvmlab.exits.pcimap import iomem_regions, pci_regions

DATA = Path(__file__).parent / "data"


def recorded(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture(scope="module")
def storm() -> Profile:
    regions = iomem_regions(recorded("iomem-l2-q35.txt"))
    return tracepoints.parse_output(
        recorded("trace-timer-storm-l2.txt"), "ts/l1/idle", 5.0, regions
    )


def test_storm_profile_names_the_pm_timer_port(storm: Profile) -> None:
    assert storm.vendor == "svm" and storm.partial is None
    top = storm.sorted_reasons()[0]
    assert (top.reason, top.kind) == ("io", "io")
    assert top.count / storm.total > 0.5  # the storm: most exits are port reads
    port = storm.pio[0]
    assert (port.port, port.write, port.name) == (0x608, False, "ACPI PM timer")
    assert port.count <= top.count


def test_storm_profile_counts_add_up(storm: Profile) -> None:
    assert sum(storm.vcpus.values()) == storm.total
    assert set(storm.vcpus) == {0, 1}
    for reason in storm.reasons:
        assert reason.time_ns is not None and reason.min_ns is not None
        assert reason.max_ns is not None and reason.avg_ns is not None
        assert reason.min_ns <= reason.avg_ns <= reason.max_ns, reason
    msrs = {m.index: m for m in storm.msr}
    assert msrs[0x80B].name == "x2APIC EOI" and msrs[0x80B].write


def test_storm_profile_cpu_window(storm: Profile) -> None:
    cpu = storm.cpu
    assert cpu is not None and cpu.seconds > 4
    assert cpu.host_user >= cpu.host_guest > 0  # guest time is counted in user time too
    assert any(name.startswith("CPU 0/KVM") for name in cpu.threads)
    vcpu = next(v for k, v in cpu.thread_split.items() if k.startswith("CPU 0/KVM"))
    assert vcpu["guest"] > 0 and vcpu["kernel"] > 0  # recorded: an idle storm is in both
    assert storm.seconds == cpu.seconds


def test_cut_short_output_is_partial() -> None:
    text = recorded("trace-timer-storm-l2.txt")
    cut = text[: text.index("=== hist")]
    profile = tracepoints.parse_output(cut, "ts/l1/idle", 5.0)
    assert profile.partial and not profile.reasons


def test_hist_dropped_entries_are_reported() -> None:
    text = (
        "# event histogram\n#\n{ port:        608, rw:          0, size:          4 } "
        "hitcount:         12\n\nTotals:\n    Hits: 14\n    Entries: 1\n    Dropped: 2\n"
    )
    (hist,) = tracepoints.parse_hists(text)
    assert hist.rows == [({"port": 608, "rw": 0, "size": 4}, {"hitcount": 12})]
    assert hist.dropped == 2


def test_iomem_names_virtio_bars_smallest_first() -> None:
    regions = iomem_regions(recorded("iomem-l2-q35.txt"))
    named = {name for _, _, name in regions}
    assert any(n.endswith("virtio-pci-modern") and n.startswith("0000:00:") for n in named)
    assert "IOAPIC 0" in named and "Local APIC" in named
    sizes = [size for _, size, _ in regions]
    assert sizes == sorted(sizes)
    assert not any(n == "System RAM" or n.startswith("PCI Bus") for n in named)


def test_proc_stat_busy_leaves_steal_out() -> None:
    before, after = recorded("proc-stat-l2-before.txt"), recorded("proc-stat-l2-after.txt")
    busy0, total0 = proc_stat_busy(before)
    busy1, total1 = proc_stat_busy(after)
    assert 0 <= busy1 - busy0 < total1 - total0
    steal = [int(line.split()[8]) for line in (before, after) for line in [line.splitlines()[0]]]
    assert busy1 - busy0 < (total1 - total0) - (steal[1] - steal[0]) / 100 + 0.01
    window = CpuWindow(seconds=5.0, host_user=1.0, host_system=0.5, host_guest=0.2)
    add_guest_side(window, before, after, wall=5.0)
    assert window.guest_busy is not None and window.guest_percent is not None
    assert window.gap_percent == pytest.approx(window.host_percent - window.guest_percent)


def test_query_stats_recorded() -> None:
    data = json.loads(recorded("qmp-timer-storm-l2.json"))
    reply = data["query-stats-vm"] + data["query-stats-vcpu"]
    totals, per_vcpu = qstats.sample(reply)
    assert totals["exits"] > 0 and totals["io_exits"] > 0
    assert sorted(per_vcpu) == [0, 1] and sum(per_vcpu.values()) == totals["exits"]
    later = {k: v * 2 for k, v in totals.items()}
    profile = qstats.from_samples("x/y", (totals, per_vcpu), (later, per_vcpu), 2.0)
    assert profile.counters["exits"] == totals["exits"] and profile.total == totals["exits"]


def test_query_stats_under_tcg_is_empty() -> None:
    profile = qstats.from_samples("x/y", qstats.sample([]), qstats.sample([]), 1.0)
    assert profile.partial and "KVM" in profile.partial


def test_query_pci_regions_recorded() -> None:
    regions = pci_regions(json.loads(recorded("qmp-timer-storm-l2.json"))["query-pci"])
    assert regions and all(size > 0 for _, size, _ in regions)
    assert any(name.startswith("virtio ") for _, _, name in regions)


def test_thread_times_and_window() -> None:
    start = ThreadTimes.parse("100.0 100", "10 50 20 30 CPU 0/KVM\n11 5 5 0 worker\nbad line")
    end = ThreadTimes.parse("102.0 100", "10 150 40 120 CPU 0/KVM\n12 9 9 0 worker")
    window = cpu_window(start, end)
    assert (window.seconds, window.host_user, window.host_system, window.host_guest) == (
        2.0,
        1.0,
        0.2,
        0.9,
    )
    assert window.threads == {"CPU 0/KVM (10)": 1.2}  # thread 11 ended, 12 began: left out
    # user 1.0 s of which 0.9 s in guest mode: QEMU's own user space had 0.1 s
    assert window.thread_split == {
        "CPU 0/KVM (10)": {"guest": 0.9, "kernel": 0.2, "qemu_user": 0.1}
    }
    assert window.host_percent == pytest.approx(60.0)


def test_json_round_trip(storm: Profile) -> None:
    again = from_json(json.loads(json.dumps(storm.to_json())))
    assert again == storm
    with pytest.raises(ValueError):
        from_json({**storm.to_json(), "schema": 99})


def test_perf_kvm_stat_seed001_before_and_after() -> None:
    from kvmlab.exits.perfkvm import parse_report
    from kvmlab.exits.rules import load_rules, verify_fix

    before = parse_report(recorded("perf-kvm-stat-live-seed001-before.txt"), "win10", 1.0)
    after = parse_report(recorded("perf-kvm-stat-live-seed001-after.txt"), "win10", 1.0)
    assert before.vendor == "vmx" and before.total == 70746
    io = next(r for r in before.reasons if r.reason == "IO_INSTRUCTION")
    assert (io.kind, io.count, io.min_ns, io.max_ns) == ("io", 55654, 3540, 74940)
    assert io.avg_ns == pytest.approx(13630)
    assert before.kind_count("io") / before.total == pytest.approx(0.7867, abs=1e-4)
    assert after.kind_count("io") == 50
    rule = next(r for r in load_rules() if r.id == "io-exit-storm")
    checks = verify_fix(rule, before, after)
    assert checks and all(c.dropped for c in checks)


def test_perf_ioport_and_mmio_tables() -> None:
    from kvmlab.exits.perfkvm import parse_report

    rows = [
        "      IO Port Access    Samples  Samples%     Time%    Min Time    Max Time   Avg time",
        "          0x608:PIN       2470    98.00%    97.00%      3.10us     40.00us   5.00us "
        "( +-   1.00% )",
        "           0x70:POUT        50     2.00%     3.00%      2.00us      9.00us   4.00us "
        "( +-   2.00% )",
        "         MMIO Access    Samples  Samples%     Time%    Min Time    Max Time   Avg time",
        "     0xfed000f0:R          10   100.00%   100.00%      9.00us     20.00us  10.00us "
        "( +-   3.00% )",
    ]  # the layout of perf's ioport and mmio reports (tools/perf/arch/x86/util/kvm-stat.c)
    text = "Analyze events for all VMs, all VCPUs:\n\n" + "\n\n".join(rows)
    profile = parse_report(text, "x", 2.0)
    assert [(p.port, p.write, p.name) for p in profile.pio] == [
        (0x608, False, "ACPI PM timer"),
        (0x70, True, "RTC index (CMOS)"),
    ]
    assert profile.mmio[0].gpa == 0xFED000F0 and "HPET" in profile.mmio[0].name
    assert profile.rate(profile.pio[0].count) == 1235.0


def test_perf_import_refuses_other_text(tmp_path: Path) -> None:
    from kvmlab.errors import UsageError
    from kvmlab.exits.perfkvm import import_file

    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    with pytest.raises(UsageError, match="no perf kvm stat table"):
        import_file(junk, "x", 1.0)
    with pytest.raises(UsageError, match="cannot read"):
        import_file(tmp_path / "missing", "x", 1.0)


def test_perf_kvm_stat_report_recorded_in_l1() -> None:
    """``perf kvm stat record -p`` of the storming L2, run inside L1 in QEMU's mount
    namespace (nsenter -m -r), then ``report --event=vmexit`` and ``--event=ioport``."""
    from kvmlab.exits.perfkvm import parse_report

    profile = parse_report(recorded("perf-kvm-stat-report-timer-storm-l2.txt"), "ts", 5.0)
    assert profile.vendor == "svm"
    assert [r.reason for r in profile.sorted_reasons()][:2] == ["io", "msr"]
    assert profile.pio[0].port == 0x608 and profile.pio[0].count == profile.kind_count("io")


def test_json_rows_keep_their_own_figures_when_names_repeat() -> None:
    """SVM prints one name for several codes (e.g. exceptions it does not name): each row
    keeps its own count, rate and share."""
    from kvmlab.exits.model import ReasonStat

    profile = Profile(
        address="x",
        provider="p",
        provider_note="",
        seconds=2.0,
        reasons=[
            ReasonStat("err", "other", 30, time_ns=300),
            ReasonStat("err", "other", 10, time_ns=500),
        ],
    )
    rows = profile.to_json()["reasons"]
    assert [(r["count"], r["rate"], r["share"], r["avg_ns"]) for r in rows] == [
        (30, 15.0, 0.75, 10.0),
        (10, 5.0, 0.25, 50.0),
    ]
