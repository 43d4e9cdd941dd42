"""Pure parts of kvmlab migrate: argv for the destination, plans, stats, heartbeats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.guest.standalone import parse_ldd
from kvmlab.migrate.guestside import Check
from kvmlab.migrate.modes import Settings, check_settings, plan
from kvmlab.migrate.probe import HeartbeatWatch
from kvmlab.migrate.result import Outcome, text
from kvmlab.migrate.stats import info_migrate, parse, passes
from kvmlab.runtime.qemu.handover import destination_argv

GUEST = Path("/run/kvmlab/mig/vm")
DEST = GUEST / ".migration-1"
OFFERED_72 = {
    "xbzrle",
    "rdma-pin-all",
    "auto-converge",
    "zero-blocks",
    "compress",
    "events",
    "postcopy-ram",
    "x-colo",
    "release-ram",
    "block",
    "return-path",
    "pause-before-switchover",
    "multifd",
    "dirty-bitmaps",
    "postcopy-blocktime",
    "late-block-activate",
    "x-ignore-shared",
    "validate-uuid",
    "background-snapshot",
    "zero-copy-send",
    "postcopy-preempt",
}


def test_destination_argv_moves_run_files_strips_forwards_and_waits() -> None:
    argv = [
        "/usr/bin/qemu-system-x86_64",
        "-netdev",
        "user,id=net0,hostfwd=tcp:127.0.0.1:2222-:22,hostfwd=tcp:127.0.0.1:8080-:80",
        "-chardev",
        f"socket,id=qmp,path={GUEST}/qmp.sock,server=on,wait=off",
        "-pidfile",
        f"{GUEST}/qemu.pid",
        "-blockdev",
        "driver=file,filename=/labs/vm.qcow2",
    ]
    out, forwards = destination_argv(argv, GUEST, DEST)
    assert out[2] == "user,id=net0"
    assert forwards == [("net0", "tcp:127.0.0.1:2222-:22"), ("net0", "tcp:127.0.0.1:8080-:80")]
    assert f"path={DEST}/qmp.sock" in out[4] and out[6] == f"{DEST}/qemu.pid"
    assert out[8] == "driver=file,filename=/labs/vm.qcow2"  # disks are shared, not moved
    assert out[-2:] == ["-incoming", "defer"]
    other, _ = destination_argv(
        ["/usr/bin/env", "/usr/bin/qemu-system-x86_64", "-m", "1G"],
        GUEST,
        DEST,
        qemu="/opt/qemu10/bin/qemu-system-x86_64",
    )
    assert other[:2] == ["/usr/bin/env", "/opt/qemu10/bin/qemu-system-x86_64"]


def test_destination_argv_leaves_a_sibling_guest_alone() -> None:
    sibling = f"{GUEST}2/qmp.sock"  # /run/kvmlab/mig/vm2: not below vm/
    out, _ = destination_argv(["qemu-system-x86_64", sibling], GUEST, DEST)
    assert out[1] == sibling


@pytest.mark.parametrize(
    ("mode", "source", "dest"),
    [
        ("precopy", {"events": True}, {}),
        ("postcopy", {"postcopy-ram": True, "events": True}, {"postcopy-ram": True}),
        ("multifd", {"multifd": True, "events": True}, {"multifd": True}),
        ("auto-converge", {"events": True, "auto-converge": True}, {}),
        ("xbzrle", {"events": True, "xbzrle": True}, {}),
    ],
)
def test_plan_sets_capabilities_on_the_right_sides(
    mode: str, source: dict[str, bool], dest: dict[str, bool]
) -> None:
    p = plan(Settings(mode=mode, downtime_limit_ms=50, bandwidth_mibs=100), OFFERED_72)
    on = {k: v for k, v in p.source_caps.items() if v}
    assert on == source and {k: v for k, v in p.dest_caps.items() if v} == dest
    # every capability a mode uses is set, off when unused: an earlier destination keeps them
    off = {"postcopy-ram", "multifd", "auto-converge", "xbzrle"} - set(on)
    assert all(p.source_caps[c] is False and p.dest_caps[c] is False for c in off)
    assert "dirty-limit" not in p.source_caps  # QEMU 7.2 does not offer it
    assert p.source_params["downtime-limit"] == 50
    assert p.source_params["max-bandwidth"] == 100 * 1024 * 1024
    assert p.dest_params["multifd-channels"] == 2 and p.dest_params["downtime-limit"] == 300


def test_plan_resets_parameters_to_qemus_defaults() -> None:
    p = plan(Settings(mode="precopy"), OFFERED_72)
    assert p.source_params == {
        "downtime-limit": 300,
        "max-bandwidth": 134217728,
        "multifd-channels": 2,
    }
    assert p.describe() == "precopy (QEMU defaults)"
    auto = plan(Settings(mode="auto"), OFFERED_72)
    assert auto.source_params["downtime-limit"] == 50 and auto.source_caps["postcopy-ram"]
    assert auto.describe() == "auto (postcopy-ram, downtime-limit=50)"


def test_on_timeout_postcopy_enables_postcopy_from_the_start() -> None:
    p = plan(Settings(mode="precopy", on_timeout="postcopy"), OFFERED_72)
    assert p.source_caps["postcopy-ram"] and p.dest_caps["postcopy-ram"]
    with pytest.raises(UsageError, match="cannot go with multifd"):
        plan(Settings(mode="multifd", on_timeout="postcopy"), OFFERED_72)


def test_plan_refuses_a_mode_this_qemu_lacks() -> None:
    with pytest.raises(UsageError, match="no migration capability 'dirty-limit'"):
        plan(Settings(mode="dirty-limit"), OFFERED_72)  # QEMU 7.2 has no dirty-limit
    with pytest.raises(UsageError, match="unknown migration mode"):
        plan(Settings(mode="teleport"), OFFERED_72)


@pytest.mark.parametrize(
    "bad",
    [
        Settings(downtime_limit_ms=0),
        Settings(bandwidth_mibs=0),
        Settings(bandwidth_mibs=-1),
        Settings(multifd_channels=0),
        Settings(max_seconds=0),
        Settings(on_timeout="wait"),
        Settings(mode="Precopy"),
        Settings(mode="postcopy", compare_pages=True),
        Settings(mode="auto", compare_pages=True),
        Settings(on_timeout="postcopy", compare_pages=True),
    ],
)
def test_check_settings_refuses(bad: Settings) -> None:
    with pytest.raises(UsageError):
        check_settings(bad)


def test_compare_pages_goes_with_every_precopy_mode() -> None:
    for mode in ("precopy", "multifd", "auto-converge", "xbzrle", "dirty-limit"):
        check_settings(Settings(mode=mode, compare_pages=True))


REPLY = {
    "expected-downtime": 300,
    "status": "active",
    "setup-time": 4,
    "total-time": 3012,
    "ram": {
        "total": 537919488,
        "postcopy-requests": 0,
        "dirty-sync-count": 2,
        "multifd-bytes": 0,
        "pages-per-second": 34760,
        "downtime-bytes": 0,
        "page-size": 4096,
        "remaining": 104857600,
        "postcopy-bytes": 0,
        "mbps": 1045.53,
        "transferred": 433000000,
        "dirty-sync-missed-zero-copy": 0,
        "precopy-bytes": 433000000,
        "duplicate": 30000,
        "dirty-pages-rate": 12000,
        "skipped": 0,
        "normal-bytes": 420000000,
        "normal": 102539,
    },
}


def test_parse_and_info_migrate_match_qemus_layout() -> None:
    s = parse(REPLY, 3.0)
    assert s.status == "active" and s.get("mbps") == 1045.53 and s.get("total-time") == 3012
    lines = info_migrate(s)
    assert lines[0] == "Migration status: active"
    assert "expected downtime: 300 ms" in lines
    assert "throughput: 1045.53 mbps" in lines
    assert "transferred ram: 422852 kbytes" in lines
    assert "dirty sync count: 2" in lines
    done = parse({**REPLY, "status": "completed", "downtime": 104}, 13.0)
    assert "downtime: 104 ms" in info_migrate(done)
    assert not any(line.startswith("expected downtime") for line in info_migrate(done))


def test_parse_ignores_what_it_does_not_know_and_keeps_the_error() -> None:
    s = parse({"status": "failed", "error-desc": "Unable to write to socket", "x-new": 1}, 1.0)
    assert s.status == "failed" and s.error == "Unable to write to socket"
    assert "error: Unable to write to socket" in info_migrate(s)


def test_passes_split_transfer_by_dirty_sync() -> None:
    samples = [
        parse({"status": "active", "ram": {"dirty-sync-count": n, "transferred": b}}, t)
        for t, n, b in [(0.0, 1, 0), (1.0, 1, 100), (2.0, 2, 400), (2.5, 3, 450), (3.0, 3, 460)]
    ]
    got = passes(samples)
    assert [p["pass"] for p in got] == [1, 2, 3]
    assert [p["bytes"] for p in got] == [400, 50, 10]


def test_heartbeat_gap_is_the_longest_pause_counted_whole() -> None:
    """A 1.49 s pause that crosses the window's end is 1.49 s, not the 0.48 s before it."""
    watch = HeartbeatWatch([])
    watch.arrivals = [1.0, 1.01, 1.02, 1.5, 1.51, 3.0]
    gap = watch.longest_gap(1.0, 2.0)
    assert gap is not None and abs(gap.seconds - 1.49) < 1e-9 and gap.start == 1.51
    inside = watch.longest_gap(2.0, 2.9)  # no arrival inside: the pause spans the window
    assert inside is not None and abs(inside.seconds - 1.49) < 1e-9
    early = watch.longest_gap(1.2, 1.505)  # began before the window: counted from 1.02
    assert early is not None and abs(early.seconds - 0.48) < 1e-9 and early.start == 1.02
    assert watch.beats(0, 10) == 6


def test_a_pause_still_going_counts_up_to_the_window_end() -> None:
    watch = HeartbeatWatch([])
    watch.arrivals = [1.0, 1.01]
    gap = watch.longest_gap(1.0, 4.0)
    assert gap is not None and abs(gap.seconds - 2.99) < 1e-9
    assert HeartbeatWatch([]).longest_gap(0.0, 1.0) is None


def test_the_window_closes_only_once_heartbeats_are_steady() -> None:
    """A stall that begins right after the resume keeps the window open past it."""
    import threading
    import time

    from kvmlab.migrate.probe import STEADY_S

    watch = HeartbeatWatch([])
    t0 = time.monotonic()
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            now = time.monotonic()
            if not 0.2 <= now - t0 < 0.9:  # a 0.7 s stall, 0.2 s after the resume
                watch.arrivals.append(now)
            time.sleep(0.01)

    beating = threading.Thread(target=beat)
    beating.start()
    try:
        end = watch.wait_steady(t0, pause=0.1, ceiling=30)
    finally:
        stop.set()
        beating.join()
    assert end - t0 >= 0.9 + STEADY_S - 0.1 - 0.05  # steady: no pause over 0.1 s for 1 s
    gap = watch.longest_gap(t0, end)
    assert gap is not None and gap.seconds >= 0.65


def test_heartbeat_watch_sees_two_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1\n")
    watch = HeartbeatWatch([a, b]).start()
    import time

    time.sleep(0.05)
    with a.open("a") as f:
        f.write("2\n")
    time.sleep(0.05)
    b.write_text("3\n")
    time.sleep(0.05)
    watch.stop()
    assert len(watch.arrivals) == 2  # growth is an arrival; what was there before is not


def test_heartbeat_watch_finds_a_later_file_and_survives_truncation(tmp_path: Path) -> None:
    """A destination libvirt starts later is looked for until it exists; a file a new
    QEMU truncates (the same log reopened) counts again from its new size."""
    import time

    old, later = tmp_path / "old", tmp_path / "later"
    old.write_text("a long line from an earlier run\n")
    watch = HeartbeatWatch([lambda: later if later.exists() else None]).start()
    time.sleep(0.05)
    later.write_text("x\n")  # found now: what it holds is its starting size
    time.sleep(0.08)
    with later.open("a") as f:
        f.write("1\n")
    time.sleep(0.05)
    watch.stop()
    assert len(watch.arrivals) == 1
    watch = HeartbeatWatch([old]).start()
    time.sleep(0.05)
    old.write_text("")  # truncated by a new writer: no arrival
    time.sleep(0.05)
    old.write_text("b\n")  # shorter than before, yet a heartbeat
    time.sleep(0.05)
    watch.stop()
    assert len(watch.arrivals) == 1


def test_verdict_never_calls_a_broken_guest_verified() -> None:
    done = parse({"status": "completed", "downtime": 90}, 5.0)
    ok = Outcome(
        "mig/vm",
        "precopy",
        status="completed",
        samples=[done],
        checks_after=[Check("memory pattern", True, "ok")],
    )
    assert ok.verified and ok.verdict == "VERIFIED"
    bad = Outcome(
        "mig/vm",
        "precopy",
        status="completed",
        samples=[done],
        checks_after=[
            Check("guest agent", True, ""),
            Check("memory pattern", False, "1 BAD bad=3 first=17"),
        ],
    )
    assert not bad.verified and bad.verdict == "FAILED"
    assert any("FAIL memory pattern" in line for line in text(bad))
    assert Outcome("mig/vm", "precopy", status="completed").verdict == "FAILED"  # no checks
    cancelled = Outcome("mig/vm", "precopy", status="cancelled", cancelled="not converged")
    assert cancelled.verdict == "CANCELLED"
    assert bad.to_json()["verdict"] == "FAILED"


def test_parse_ldd() -> None:
    out = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibglib-2.0.so.0 => /lib/x86_64-linux-gnu/libglib-2.0.so.0 (0x00007f58)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f5896b16000)
"""
    assert parse_ldd(out) == [
        ("libglib-2.0.so.0", Path("/lib/x86_64-linux-gnu/libglib-2.0.so.0")),
        ("ld-linux-x86-64.so.2", Path("/lib64/ld-linux-x86-64.so.2")),
    ]


RECORDED = json.loads((Path(__file__).parent / "data" / "query-migrate.json").read_text())
"""Real final query-migrate replies of QEMU 7.2 and 10.0 (kvmlab migrate, labs/migrate.toml)."""


def test_recorded_72_precopy_reply_reads_as_info_migrate() -> None:
    s = parse(RECORDED["qemu-7.2-precopy-completed"], 2.8)
    lines = info_migrate(s)
    assert lines[:3] == ["Migration status: completed", "total time: 2762 ms", "downtime: 39 ms"]
    assert any(x.startswith("transferred ram: ") and x.endswith(" kbytes") for x in lines)
    assert s.ram["dirty-sync-count"] >= 2 and s.ram["downtime-bytes"] > 0


def test_recorded_72_postcopy_reply_has_postcopy_figures() -> None:
    s = parse(RECORDED["qemu-7.2-postcopy-completed"], 1.9)
    assert s.get("postcopy-bytes") and s.get("downtime") == 5
    assert "postcopy ram: " in "\n".join(info_migrate(s))


def test_recorded_100_reply_reads_the_same_way() -> None:
    s = parse(RECORDED["qemu-10.0-precopy-completed"], 2.4)
    assert s.status == "completed" and s.get("total-time") == 2438 and s.get("downtime") == 34
    assert "dirty sync count: " in "\n".join(info_migrate(s))


def test_qemu_72_reports_completed_before_its_times() -> None:
    """What final_times works around: QEMU 7.2 says completed with total-time and downtime
    still 0 while downtime-bytes shows data went across in the stop."""
    s = parse(RECORDED["qemu-7.2-completed-before-times"], 2.6)
    assert s.status == "completed" and s.get("total-time") == 0 and s.get("downtime") == 0
    assert s.ram["downtime-bytes"] > 0


def test_final_times_samples_again_until_qemu_has_them() -> None:
    from kvmlab.migrate.job import final_times

    replies = iter(
        [RECORDED["qemu-7.2-completed-before-times"], RECORDED["qemu-7.2-precopy-completed"]]
    )

    class Transport:
        def sample(self) -> tuple[dict[str, object], None]:
            return next(replies), None

    import time

    out = Outcome(
        "m/vm", "precopy", samples=[parse(RECORDED["qemu-7.2-completed-before-times"], 2.6)]
    )
    final_times(Transport(), out, time.monotonic())  # type: ignore[arg-type]
    assert out.final is not None and out.final.get("total-time") == 2762
    assert out.raw_last == RECORDED["qemu-7.2-precopy-completed"]


USERNET = (
    "Hub -1 (net0):\r\n  Protocol[State]    FD  Source Address  Port   Dest. Address  Port "
    "RecvQ SendQ\r\n  TCP[HOST_FORWARD]  16       127.0.0.1  2230       10.0.2.15    22"
    "     0     0\r\n"
)
"""QEMU 7.2's ``info usernet`` after ``hostfwd_add net0 tcp:127.0.0.1:2230-:22``."""


def test_forward_found_by_its_host_port_not_the_guest_port() -> None:
    from kvmlab.runtime.monitor import forwarded as _forwarded

    assert _forwarded(USERNET, "2230")
    assert not _forwarded(USERNET, "22")  # the guest port, or the FD column, is no match
    assert not _forwarded(USERNET, "16")


def test_on_timeout_postcopy_keeps_the_modes_own_capability() -> None:
    for mode, cap in (("xbzrle", "xbzrle"), ("auto-converge", "auto-converge")):
        p = plan(Settings(mode=mode, on_timeout="postcopy"), OFFERED_72)
        assert p.source_caps[cap] and p.source_caps["postcopy-ram"]
