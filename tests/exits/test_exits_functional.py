"""A nested lab for real, booted once for the module: the timer-storm lab (the idle-guest
exit-storm write-up's idle guest as an L2 under KVM inside an L1 guest hypervisor; on a
host without hardware KVM, L1 under TCG with one vCPU) with L1's nested paging off (the
nested-paging talk's shadow-paging row).

`kvmlab up` runs kvmlab inside L1 to start L2 there; L1's KVM parameters are read back;
`exec` and `ps` reach L2 through L1; the storm is profiled where L2's KVM runs, diagnosed,
and tracefs is left exactly as found, also when the profile is interrupted; L2's QEMU is
sampled by perf inside L1 (`--host-profile`: its vCPU threads in guest mode, nothing left
in L1 afterwards, also after Ctrl-C) and L1's on this host; `down` stops L2 before L1 and
leaves nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from kvmlab.host.accel import choose_accel
from tests.conftest import LABS, cli, interrupted_after, interrupted_once
from tests.readme import readme_line
from tests.runtime.conftest import qemu_pids

pytestmark = pytest.mark.functional

TRACING_STATE = (
    "ls /sys/kernel/tracing/instances; cat /sys/kernel/tracing/synthetic_events; "
    "grep -v '^#' /sys/kernel/tracing/events/kvm/*/trigger || true"
)
SHADOW_PAGING = "when_tcg = { vcpus = 1 }\nkvm = { nested_paging = false }"
L2 = "timer-storm/l1/idle"
LEFTOVERS = (
    # the agent's /tmp and the /tmp of L2's QEMU (perf runs in its mount namespace), and
    # any perf still running
    "ls -d /tmp/kvmlab_* 2>/dev/null; "
    'f=/run/kvmlab/timer-storm/idle/qemu.pid; [ -r "$f" ] && '
    'nsenter -t "$(cat "$f")" -m -r sh -c "ls -d /tmp/kvmlab_* 2>/dev/null"; '
    "for p in /proc/[0-9]*; do read -r c < $p/comm 2>/dev/null && "
    '[ "$c" = perf ] && echo "perf ${p#/proc/}"; done; true'
)


kvmlab = cli


class Storm(dict[str, str]):
    """The lab's environment (a dict, as ``cli`` takes it) and what ``kvmlab up`` printed."""

    up_stderr = ""


@pytest.fixture(scope="module")
def storm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Storm]:
    """The lab up for the module; afterwards stopped gracefully (L2 inside L1 first) and
    nothing of it left."""
    tmp = tmp_path_factory.mktemp("storm")
    shipped = (LABS / "timer-storm.toml").read_text()
    assert "when_tcg = { vcpus = 1 }" in shipped
    lab = tmp / "timer-storm.toml"
    lab.write_text(shipped.replace("when_tcg = { vcpus = 1 }", SHADOW_PAGING, 1))
    run_root = tmp / "run"
    env = Storm({**os.environ, "KVMLAB_RUN_DIR": str(run_root)})
    up = kvmlab(env, *readme_line("kvmlab up timer-storm", lab=str(lab)), timeout=1200)
    env.up_stderr = up.stderr
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        yield env
        down = kvmlab(env, *readme_line("kvmlab down timer-storm"), timeout=600)
        assert down.returncode == 0, down.stderr
        assert "stopping the guests inside timer-storm/l1" in down.stderr
        inside = down.stderr.index("inside timer-storm/l1")
        assert inside < down.stderr.index("stopping timer-storm/l1\n"), down.stderr
    finally:
        kvmlab(env, "down", "timer-storm", "--force", timeout=600)
    assert not qemu_pids(str(run_root))
    assert not (run_root / "timer-storm").exists()


def test_l2_is_up_inside_l1_with_l1s_kvm_as_the_lab_asks(storm: Storm) -> None:
    assert "timer-storm/l1/idle is up inside timer-storm/l1 (kvm," in storm.up_stderr
    read_back = "timer-storm/l1's KVM: kvm_amd.npt=0 (read back from its /sys/module)"
    assert read_back in storm.up_stderr
    l1 = kvmlab(
        storm,
        "exec",
        "timer-storm/l1",
        "--",
        "sh",
        "-c",
        "test -c /dev/kvm && cd /sys/module/kvm_amd/parameters && cat nested npt && nproc",
    )
    assert l1.returncode == 0, l1.stderr
    nested, npt, vcpus = l1.stdout.split()
    assert nested in ("1", "Y"), "L1 is a guest hypervisor with nested KVM"
    assert npt == "N", "checked by the test itself, not by kvmlab's read-back"
    assert vcpus == ("2" if choose_accel().accel == "kvm" else "1"), "when_tcg"

    l2 = kvmlab(storm, "exec", "timer-storm/l1/idle", "--", "hostname")
    assert (l2.returncode, l2.stdout.strip()) == (0, "idle")
    code = kvmlab(storm, "exec", "timer-storm/l1/idle", "--", "sh", "-c", "exit 5")
    assert code.returncode == 5, "an L2 command's exit status comes back through L1"

    rows = {r["address"]: r for r in json.loads(kvmlab(storm, "ps", "-o", "json").stdout)["guests"]}
    assert set(rows) == {"timer-storm/l1", "timer-storm/l1/idle"}
    l1_row, l2_row = rows["timer-storm/l1"], rows["timer-storm/l1/idle"]
    assert (l1_row["level"], l2_row["level"]) == ("L1", "L2")
    assert (l2_row["accel"], l2_row["via"]) == ("kvm", "l1")
    assert l2_row["boot_s"]["total"] > 0


def tracing_state(env: Storm) -> str:
    got = kvmlab(env, "exec", "timer-storm/l1", "--", "sh", "-c", TRACING_STATE)
    assert got.returncode == 0, got.stderr
    return got.stdout


def test_exits_profile_finds_the_storm_and_diagnose_names_it(storm: Storm) -> None:
    before = tracing_state(storm)
    run = kvmlab(storm, *readme_line("kvmlab exits timer-storm/l1/idle"), "-s", "4", "-o", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    profile = json.loads(run.stdout)
    assert profile["provider"] == "tracepoints" and profile["vendor"] == "svm"
    assert profile["pio"][0]["port"] == 0x608 and profile["pio"][0]["name"] == "ACPI PM timer"
    assert profile["cpu"]["host_percent"] > profile["cpu"]["guest_percent"]
    assert tracing_state(storm) == before, "tracefs is left as it was found"

    diagnose = readme_line("kvmlab diagnose timer-storm/l1/idle")
    diag = kvmlab(storm, *diagnose, "--seconds", "4", "-o", "json")
    assert diag.returncode == 0, diag.stderr[-3000:]
    findings = {f["rule"]: f for f in json.loads(diag.stdout)["findings"]}
    # the cause is found whatever else a loaded host adds (busy-host-idle-guest ranked first
    # once, with other tests running beside this one)
    assert "acpi-pm-timer-reads" in findings, list(findings)
    assert findings["acpi-pm-timer-reads"]["fix"]["lab"]["clock.timers.kvmclock.present"] is True


def test_ps_threads_splits_each_qemu_where_it_runs(storm: Storm) -> None:
    """L1's QEMU on this host (TCG: all of it QEMU's user time), L2's inside L1 (KVM there:
    its vCPU threads spend time in guest mode), each beside its guest's own CPU."""
    run = kvmlab(storm, "ps", "--threads", "-o", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {r["address"]: r for r in json.loads(run.stdout)["guests"]}
    l1, l2 = rows["timer-storm/l1"], rows["timer-storm/l1/idle"]
    assert l1["threads_where"] == "this host" and l2["threads_where"] == "inside timer-storm/l1"
    assert l2["threads_problem"] is None, l2["threads_problem"]
    vcpus = [t for t in l1["threads"] if t["role"] == "vCPU"]
    assert vcpus and all(t["name"].endswith(f"/{l1['accel'].upper()}") for t in vcpus)
    if l1["accel"] == "tcg":  # no guest mode under TCG: all of it is QEMU's user time
        assert all(t["guest_pct"] == 0 for t in vcpus)
    kvm = [t for t in l2["threads"] if t["name"].endswith("/KVM")]
    assert len(kvm) == 2 and any(t["guest_pct"] > 0 for t in kvm), l2["threads"]
    # the text form of this answer: tests/exits/test_ps_threads_text.py (one inner
    # `kvmlab ps` in this L1 takes ~50 s: the storm keeps its only vCPU busy)


def test_tcg_guest_has_no_exits(storm: Storm) -> None:
    run = kvmlab(storm, "exits", "timer-storm/l1", "--seconds", "1")
    assert run.returncode == 4
    assert "TCG has no VM exits" in run.stderr and "kvmlab exits timer-storm/l1/GUEST" in run.stderr


def test_interrupted_profile_leaves_tracefs_clean(storm: Storm) -> None:
    """Ctrl-C inside a 120 s window. L1's agent runs one command at a time and the tracer
    holds it, so the test cannot watch the set-up happen: it interrupts after 12 s (the
    set-up takes a few seconds here), and whatever stage that hits, nothing may be left."""
    before = tracing_state(storm)
    status, _, err = interrupted_after(
        storm, 12, "exits", "timer-storm/l1/idle", "--seconds", "120"
    )
    assert status == 130, err
    assert "interrupted while profiling" in err
    assert tracing_state(storm) == before, "no instance, trigger or synthetic event is left"


def test_live_refreshes_until_interrupted(storm: Storm) -> None:
    """--live takes window after window (in a pipe each is printed after the last) until
    Ctrl-C; the storm is in every one of them, and tracefs is clean afterwards."""
    before = tracing_state(storm)
    live = ("exits", "timer-storm/l1/idle", "--seconds", "2", "--live")
    status, out, err = interrupted_once(storm, "VM exits by reason", 2, *live)
    assert status == 130, err
    whole = out.count("VM exits by reason") - 1  # the last may be cut short by the Ctrl-C
    assert whole >= 1, out[-2000:]
    assert out.count("ACPI PM timer") >= whole
    assert tracing_state(storm) == before


def leftovers(env: Storm) -> str:
    """What a host profile could leave inside L1 (empty: nothing); perf that is still
    ending after an interrupted run is waited for (it stops within seconds)."""
    deadline = time.monotonic() + 60
    while True:
        got = cli(env, "exec", "timer-storm/l1", "--", "sh", "-c", LEFTOVERS)
        assert got.returncode == 0, got.stderr
        if not got.stdout.strip() or time.monotonic() > deadline:
            return got.stdout.strip()
        time.sleep(2)


def test_the_idle_l2_is_sampled_inside_l1(storm: Storm) -> None:
    run = cli(storm, "exits", L2, "--host-profile", "--seconds", "4", "-o", "json", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert (doc["schema"], doc["address"]) == ("kvmlab.host-profile/1", L2)
    assert (doc["where"], doc["accel"]) == ("inside timer-storm/l1", "kvm")
    assert doc["samples"] > 0 and doc["perf"]["version"].startswith("perf version")
    threads = {t["name"]: t for t in doc["threads"]}
    roles = {t["role"] for t in doc["threads"]}
    assert {"CPU 0/KVM", "CPU 1/KVM"} <= set(threads), sorted(threads)  # 2 vCPUs in the lab
    assert "main loop" in roles and any(n.startswith("qemu-system") for n in threads)
    vcpus = [threads["CPU 0/KVM"], threads["CPU 1/KVM"]]
    guest = sum(t["classes"]["guest"]["samples"] for t in vcpus)
    busy = sum(t["samples"] for t in vcpus)
    assert guest > 0, ("no guest-mode sample on the KVM vCPU threads", vcpus, doc["notes"])
    assert any(t["classes"]["guest"]["share"] > 0 for t in vcpus)
    assert guest <= busy
    assert doc["classes"]["guest"]["samples"] >= guest
    assert doc["guest_cpu_percent"] is not None, "read through L2's agent"
    for finding in doc["findings"]:
        assert finding["fix"]["look"] and finding["source"], finding
    assert leftovers(storm) == "", "no perf and no recording left inside L1"


def test_l1s_own_qemu_is_sampled_on_this_host(storm: Storm) -> None:
    run = cli(storm, "exits", "timer-storm/l1", "--host-profile", "--seconds", "2", "-o", "json")
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert doc["where"] == "this host"
    vcpus = [t for t in doc["threads"] if t["role"] == "vCPU"]
    assert vcpus and all(t["name"].endswith(f"/{doc['accel'].upper()}") for t in vcpus)
    if doc["accel"] == "tcg":  # L1 runs L2 and its storm: its vCPU is busy in QEMU's code
        assert doc["classes"]["guest"]["samples"] == 0
        assert sum(t["classes"]["qemu_user"]["samples"] for t in vcpus) > 0
        assert any("under TCG there is no guest mode" in n for n in doc["notes"])
    text = cli(storm, "exits", "timer-storm/l1", "--host-profile", "--seconds", "1")
    assert text.returncode == 0, text.stderr[-3000:]
    assert "its QEMU's host CPU sampled for 1 s on this host" in text.stdout
    assert "by thread" in text.stdout and "busiest symbols" in text.stdout


def test_an_interrupted_profile_leaves_nothing_in_l1(storm: Storm) -> None:
    """Ctrl-C inside a 120 s window (after 15 s: perf is recording by then); the recorder
    is stopped and its directory removed from here, through L1's agent."""
    status, _, err = interrupted_after(storm, 15, "exits", L2, "--host-profile", "--seconds", "120")
    assert status == 130, err
    assert "interrupted while sampling the host CPU" in err
    assert leftovers(storm) == ""


HANDMADE_DROP = ("-chardev", "-mon", "-serial", "-pidfile", "-device", "-name", "-smp", "-m")


def handmade_argv() -> list[str]:
    """A QEMU the test starts itself inside L1 (not kvmlab): L2's kernel, clock and share,
    none of kvmlab's sockets, one vCPU, its own name, daemonized; a guest agent port of its
    own (the image's init powers a guest off that has none: the QEMU would exit seconds
    after its boot, in the middle of the test, on a slow host)."""
    rendered = cli(os.environ.copy(), "render", "timer-storm", "--guest", "l1/idle", "-o", "json")
    assert rendered.returncode == 0, rendered.stderr
    argv: list[str] = json.loads(rendered.stdout)["guests"][0]["argv"]
    out, i = [argv[0]], 1
    while i < len(argv):
        option, value = argv[i], argv[i + 1] if i + 1 < len(argv) else ""
        takes_value = not value.startswith("-")
        keep = option not in HANDMADE_DROP or (
            option == "-device" and value.startswith("virtio-9p-pci")
        )
        if keep:
            out += (
                [option, value.replace("hostname=idle", "hostname=byhand")]
                if takes_value
                else [option]
            )
        i += 2 if takes_value else 1
    return [
        *out,
        "-chardev",
        "socket,id=byhand-ga,path=/run/byhand-ga.sock,server=on,wait=off",
        "-device",
        "virtio-serial-pci,id=byhand-serial",
        "-device",
        "virtserialport,chardev=byhand-ga,name=org.qemu.guest_agent.0",
        "-name",
        "guest=byhand",
        "-smp",
        "1",
        "-m",
        "256M",
        "-daemonize",
        "-pidfile",
        "/run/byhand.pid",
    ]


def test_a_qemu_started_by_hand_inside_l1_is_profiled_and_diagnosed_there(storm: Storm) -> None:
    """The storm's guest started a second time by the test itself, with QEMU's own command
    line inside L1 (where KVM is): `exits pid:N --within` finds its storm there, and
    `diagnose` shows the fix as options of that command line."""
    started = kvmlab(storm, "exec", "timer-storm/l1", "--", *handmade_argv(), timeout=300)
    assert started.returncode == 0, started.stderr
    pidfile = kvmlab(storm, "exec", "timer-storm/l1", "--", "cat", "/run/byhand.pid")
    pid = int(pidfile.stdout)
    try:
        target = f"pid:{pid}"
        deadline = time.monotonic() + 600
        while True:  # its kernel is up once its clock reads come (progress: each profile)
            run = kvmlab(
                storm, "exits", target, "--within", "timer-storm/l1", "-s", "4", "-o", "json"
            )
            assert run.returncode == 0, run.stderr[-3000:]
            profile = json.loads(run.stdout)
            if profile["pio"] and profile["pio"][0]["port"] == 0x608:
                break
            assert time.monotonic() < deadline, profile
        assert f"pid:{pid}" in profile["address"], profile["address"]
        assert any("inside timer-storm/l1" in n for n in profile["notes"])
        diag = kvmlab(storm, "diagnose", target, "--within", "timer-storm/l1", "-s", "4")
        assert diag.returncode == 0, diag.stderr[-3000:]
        assert "acpi-pm-timer-reads" in diag.stdout
        notes = [line for line in diag.stdout.splitlines() if line.startswith("note:")]
        assert any("the rules read its QEMU command line" in n for n in notes), notes
        assert "fix in its QEMU command line:" in diag.stdout, diag.stdout
        assert "-cpu host,kvmclock=off  ->  -cpu host,kvmclock=on" in diag.stdout
        alive = kvmlab(storm, "exec", "timer-storm/l1", "--", "kill", "-0", str(pid))
        assert alive.returncode == 0, "read-only: the QEMU kvmlab did not start still runs"
    finally:
        kvmlab(storm, "exec", "timer-storm/l1", "--", "kill", str(pid))
