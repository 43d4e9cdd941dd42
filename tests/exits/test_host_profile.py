"""``kvmlab exits --host-profile``: perf's report parsed (recorded on this project's CI host
from real processes), each sample put in its class, the sampler script's refusals and
clean-up, and the command end to end on a stand-in guest process.

Recorded with ``src/kvmlab/exits/hostprof.sh run NAME SECONDS 199 PID`` (perf 6.1, kernel
6.18, 2 CPUs, 2026-11-27): ``hostprof-yes.txt`` (``yes >/dev/null``, 2 s),
``hostprof-qemu-tcg-paused-qmp.txt`` (``qemu-system-x86_64 -S -nodefaults -display none
-accel tcg -name hp,debug-threads=on -qmp unix:S,server=on,wait=off``, paused, with a
client sending ``query-status`` as fast as QMP answers, 3 s),
``hostprof-qemu-tcg-paused-idle.txt`` (the same QEMU left alone, 1 s: no sample at all),
and ``perf-report-qemu-tcg-qmp-callchains.txt`` (the same QEMU and client, then ``perf
report --stdio --no-children --sort comm,dso,sym`` with its call graphs). No guest ran
here, so guest-mode rows ([g], the VM-entry path) are tested on text written in perf's
layout below, and on a real L2 by tests/exits/test_host_profile_functional.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvmlab.errors import HostError, ProcessFailure, RuntimeFailure, ToolMissing, UsageError
from kvmlab.exits.hostprof import CLASSES, UNATTRIBUTED, HostProfile, build, classify, sections
from kvmlab.exits.perfreport import Row, parse
from kvmlab.exits.sampling import clean_argv, record_command, run_argv, run_failure, script
from tests.fakeguest import running_guest

DATA = Path(__file__).parent / "data"
YES = DATA / "hostprof-yes.txt"
QMP = DATA / "hostprof-qemu-tcg-paused-qmp.txt"
IDLE = DATA / "hostprof-qemu-tcg-paused-idle.txt"
CALLCHAINS = DATA / "perf-report-qemu-tcg-qmp-callchains.txt"
KVMLAB = str(Path(sys.executable).with_name("kvmlab"))


def built(path: Path, accel: str = "tcg", seconds: float = 3.0) -> HostProfile:
    return build(path.read_text(), "lab/vm", "this host", accel, seconds, 199, "perf record")


# -- perf report, as perf prints it ---------------------------------------------------------


def test_report_rows_are_cut_by_the_dotted_spans() -> None:
    report = parse(QMP.read_text().split("=== report\n", 1)[1])
    assert report.columns == (
        "Children",
        "Self",
        "Samples",
        "Pid:Command",
        "Shared Object",
        "Symbol",
    )
    assert (report.event, report.samples, report.lost) == ("cpu-clock", 519, 0)
    assert report.event_count == 2608039875
    assert report.self_samples == 519, "every sample is in exactly one row's Samples"
    assert report.skipped == 0
    names = {r.comm for r in report.rows}
    assert names == {"IO mon_iothread", "qemu-system-x86"}, "a name with a space stays whole"
    assert {r.level for r in report.rows} == {"k", "."}
    write = next(r for r in report.rows if r.symbol == "__GI___libc_write")
    assert (write.dso, write.level, write.comm) == ("libc.so.6", ".", "IO mon_iothread")
    assert write.tid is not None and write.children_pct is not None
    assert write.children_pct >= write.self_pct
    assert any(r.symbol.startswith("0x") for r in report.rows), "unresolved addresses kept"


def test_children_only_rows_are_chains_not_samples() -> None:
    profile = built(YES, seconds=2.0)
    report = parse(YES.read_text().split("=== report\n", 1)[1])
    chain_only = [r for r in report.rows if r.self_pct == 0 and r.samples == 0]
    assert any(r.dso == "[unknown]" for r in chain_only), "a broken user frame pointer"
    assert len(profile.rows) == len(report.rows) - len(chain_only)
    entry = (profile.pid, "entry_SYSCALL_64_after_hwframe")
    assert profile.inclusive[entry] > 0.5 * profile.sampled_seconds


def test_a_report_with_call_graphs_keeps_only_its_rows() -> None:
    text = CALLCHAINS.read_text()
    report = parse(text)
    assert report.columns == ("Overhead", "Command", "Shared Object", "Symbol")
    graph_lines = sum(1 for line in text.splitlines() if line.lstrip().startswith(("|", "---")))
    assert graph_lines > 100, "the fixture does have call graphs"
    assert len(report.rows) == 98 and report.skipped == 0
    assert all(r.level in ("k", ".") and r.dso for r in report.rows)
    assert 99.5 <= sum(r.self_pct for r in report.rows) <= 100.5
    assert report.rows[0] == Row(
        comm="IO mon_iothread",
        dso="[kernel.kallsyms]",
        level="k",
        symbol="finish_task_switch.isra.0",
        self_pct=10.51,
    )
    profile = build(text, "lab/vm", "this host", "tcg", 2.0, 199, "perf report")
    assert {t.name for t in profile.threads} == {"IO mon_iothread", "qemu-system-x86"}
    assert sum(t.samples for t in profile.threads) > 0, "samples estimated from the period"


def test_perf_rounds_a_thousand_samples_and_the_period_still_counts() -> None:
    text = QMP.read_text().replace("# Samples: 519  of event", "# Samples: 1K of event")
    report = parse(text.split("=== report\n", 1)[1])
    assert (report.samples, report.samples_approx) == (None, 1000)
    profile = build(text, "lab/vm", "this host", "tcg", 3.0, 199, "perf")
    assert profile.samples == 519, "the rows' own counts, not the rounded header"
    assert profile.sampled_seconds == pytest.approx(2.608039875)


def test_odd_lines_are_skipped_not_fatal() -> None:
    body = QMP.read_text().split("=== report\n", 1)[1]
    lines = body.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().endswith("do_syscall_64"))
    lines[at + 1 : at + 1] = [
        "    12.00%   nonsense",  # a row that does not parse
        "    x" * 2000,  # longer than any row perf prints
        "\x00\x1b[31m garbage",
        "            |--5.84%--schedule_hrtimeout_range_clock",
    ]
    lines += [
        "",
        "# Samples: 9  of event 'task-clock'",
        "# Overhead  Command  Shared Object  Symbol",
        "# ........  .......  .............  ......",
        "    100.00%  other  [kernel.kallsyms]  [k] second_table",
    ]
    report = parse("\n".join(lines))
    assert report.skipped == 1
    assert report.event == "cpu-clock" and report.self_samples == 519
    assert all(r.symbol != "second_table" for r in report.rows), "the first event's table only"


# -- classes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "dso", "symbol", "cls"),
    [
        ("k", "[kernel.kallsyms]", "do_syscall_64", "kernel"),
        ("k", "[kvm_amd]", "svm_vcpu_run", "guest"),
        ("k", "[kvm_intel]", "vmx_vcpu_run", "guest"),
        ("k", "[kernel.kallsyms]", "__vmx_vcpu_run", "guest"),
        ("k", "[kvm]", "kvm_arch_vcpu_ioctl_run", "kernel"),
        (".", "qemu-system-x86_64", "aio_pending", "qemu_user"),
        (".", "[unknown]", "0x00007f3a1c000123", "qemu_user"),
        ("g", "[guest.kernel.kallsyms]", "0xffffffff81c3d2a4", "guest"),
        ("u", "[unknown]", "0x0000557a1b2c3d4e", "guest"),
        ("H", "[unknown]", "0x1", UNATTRIBUTED),
    ],
)
def test_each_sample_has_one_class(level: str, dso: str, symbol: str, cls: str) -> None:
    assert classify(Row("t", dso, level, symbol, 1.0)) == cls


GUEST_ROWS = DATA / "hostprof-guest-rows-handwritten.txt"
"""Written by hand in perf kvm --host --guest report's layout, with perf's column widths
(no guest runs on this project's CI host): a guest sample's thread is perf's ``TID::TID``,
the VM-entry row is an older kernel's guest mode; the rows leave 10% of the period
unshown."""


def test_guest_mode_rows_and_the_gap_perf_leaves() -> None:
    profile = build(GUEST_ROWS.read_text(), "lab/l1/l2", "inside lab/l1", "kvm", 1.0, 200, "perf")
    vcpu = next(t for t in profile.threads if t.name == "CPU 0/KVM")
    assert vcpu.tid == 4003 and vcpu.role == "vCPU" and vcpu.kvm_vcpu
    assert vcpu.samples == 124, "the guest row is the vCPU's, named from /proc"
    assert vcpu.share("guest") == pytest.approx(52 / 62)
    assert vcpu.proc == {"guest_pct": 30.0, "kernel_pct": 25.0, "qemu_user_pct": 20.0}
    main = next(t for t in profile.threads if t.role == "main loop")
    assert main.share("qemu_user") == pytest.approx(20 / 28)
    assert profile.unattributed == pytest.approx(0.10)
    assert any("10% of the sampled time is in no row" in n for n in profile.notes)
    doc = profile.to_json()
    shares = sum(doc["classes"][c]["share"] for c in (*CLASSES, UNATTRIBUTED))
    assert shares == pytest.approx(1.0, abs=1e-3)
    assert doc["threads"][0]["classes"]["guest"]["samples"] == 104
    json.dumps(doc)
    bare = build(GUEST_ROWS.read_text().split("=== report\n")[1], "l2", "x", "kvm", 1, 200, "")
    (vcpu,) = [t for t in bare.threads if t.tid == 4003]
    assert (vcpu.name, vcpu.samples) == ("CPU 0/KVM", 124), "named from its host rows"


def test_a_profile_of_real_threads() -> None:
    profile = built(QMP)
    roles = {t.name if t.role != "other" else f"{t.name} (helper)": t.role for t in profile.threads}
    assert roles == {
        "IO mon_iothread": "I/O thread",
        "qemu-system-x86": "main loop",
        "qemu-system-x86 (helper)": "other",
        "CPU 0/TCG": "vCPU",
    }
    assert profile.class_seconds("guest") == 0.0, "TCG: no guest mode"
    kernel, user = profile.class_seconds("kernel"), profile.class_seconds("qemu_user")
    assert kernel + user == pytest.approx(profile.sampled_seconds, rel=0.01)
    assert profile.samples == sum(t.samples for t in profile.threads) == 519
    io = next(t for t in profile.threads if t.role == "I/O thread")
    assert io.proc is not None and io.proc["kernel_pct"] > io.proc["qemu_user_pct"]
    assert any("under TCG there is no guest mode" in n for n in profile.notes)
    doc = profile.to_json()
    assert doc["perf"]["version"] == "perf version 6.1.187"
    assert doc["symbols"][0]["share"] >= doc["symbols"][-1]["share"]
    assert len(doc["symbols"]) == 40 and all(len(t["top"]) <= 5 for t in doc["threads"])


def test_no_samples_is_said() -> None:
    profile = built(IDLE, seconds=1.0)
    assert profile.samples == 0 and profile.rows == [] and len(profile.threads) == 4
    assert profile.notes[0].startswith("no samples: QEMU did not run on a host CPU")
    assert profile.to_json()["classes"]["kernel"]["share"] == 0.0


# -- the sampler script ---------------------------------------------------------------------


def sampler(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", script(), "hostprof.sh", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["run", "other_name", "1", "199", "1"], 2, "bad NAME"),
        (["run", "kvmlab_x/../y", "1", "199", "1"], 2, "bad NAME"),
        (["run", "kvmlab_x", "1;reboot", "199", "1"], 2, "bad SECONDS"),
        (["run", "kvmlab_x", "1", "-5", "1"], 2, "bad RATE"),
        (["run", "kvmlab_x", "1", "199", "1 2"], 3, "not a process id"),
        (["run", "kvmlab_x", "1", "199", "999999999"], 3, "no process 999999999"),
        (["run", "kvmlab_x", "1", "199", "@/nonexistent/qemu.pid"], 3, "cannot read"),
    ],
)
def test_the_sampler_refuses_before_it_touches_anything(
    args: list[str], status: int, message: str
) -> None:
    done = sampler(*args)
    assert done.returncode == status and message in done.stderr, done.stderr


def test_the_sampler_says_when_perf_is_missing_or_not_for_this_kernel(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    pid = str(os.getpid())
    missing = sampler("run", "kvmlab_x", "1", "199", pid, PATH=str(empty))
    assert missing.returncode == 4 and "perf is not installed" in missing.stderr
    wrapper = tmp_path / "wrapper"
    wrapper.mkdir()
    fake = wrapper / "perf"  # what Ubuntu's /usr/bin/perf prints without linux-tools
    fake.write_text(
        "#!/bin/sh\necho 'WARNING: perf not found for kernel 6.8.0-31'\n"
        "echo '  You may need to install linux-tools-6.8.0-31-generic'\nexit 2\n"
    )
    fake.chmod(0o755)
    path = f"{wrapper}:{os.environ['PATH']}"
    wrong = sampler("run", "kvmlab_x", "1", "199", pid, PATH=path)
    assert wrong.returncode == 4, wrong.stderr
    assert "perf does not run for kernel" in wrong.stderr
    assert "perf not found for kernel 6.8.0-31" in wrong.stderr
    error = run_failure(4, wrong.stderr, None, "lab/vm", run_argv("kvmlab_x", 1, 199, pid))
    assert isinstance(error, HostError)
    assert "linux-perf (Debian), linux-tools-$(uname -r) (Ubuntu)" in error.fix[0]
    gone = run_failure(4, missing.stderr, None, "lab/vm", [])
    assert isinstance(gone, ToolMissing) and gone.install == "apt-get install linux-perf"


def test_a_failed_recording_carries_perfs_own_message(tmp_path: Path) -> None:
    """A perf whose record fails with a message, silent under -q as the real one is (CI
    met "perf record exited 255 and printed nothing" inside an L1)."""
    fakes = tmp_path / "bin"
    fakes.mkdir()
    fake = fakes / "perf"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = --version ] && { echo "perf version 6.1.192"; exit 0; }\n'
        'case " $* " in *" -q "*) ;; *) echo "failed to mmap with 12 (Cannot allocate '
        'memory)" >&2 ;; esac\n'
        "exit 255\n"
    )
    fake.chmod(0o755)
    done = sampler(
        "run", "kvmlab_x", "0.1", "199", str(os.getpid()), PATH=f"{fakes}:{os.environ['PATH']}"
    )
    assert done.returncode == 5, done.stderr
    assert "failed to mmap with 12 (Cannot allocate memory)" in done.stderr
    assert "printed nothing" not in done.stderr


SILENT_ONCE = """#!/bin/sh
# A perf whose first record exits 255 printing nothing, as perf 6.1 has inside an L1.
case $1 in
--version) echo "perf version 6.1.192"; exit 0 ;;
record)
	[ -n "$KVMLAB_FAKE_ALWAYS" ] && exit 255
	[ -e "$KVMLAB_FAKE_STATE" ] || { : >"$KVMLAB_FAKE_STATE"; exit 255; }
	while [ "$1" != -o ]; do shift; done
	echo data >"$2"; exit 0 ;;
*) echo "# Samples: 1"; exit 0 ;;
esac
"""


@pytest.mark.parametrize("always", [False, True], ids=["once", "always"])
def test_a_recording_that_fails_silently_is_run_once_more(tmp_path: Path, always: bool) -> None:
    fakes = tmp_path / "bin"
    fakes.mkdir()
    (fakes / "perf").write_text(SILENT_ONCE)
    (fakes / "perf").chmod(0o755)
    env = {
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "KVMLAB_FAKE_STATE": str(tmp_path / "ran"),
        "KVMLAB_FAKE_ALWAYS": "1" if always else "",
    }
    done = sampler("run", "kvmlab_x", "0.1", "199", str(os.getpid()), **env)
    note = "=== note perf record exited 255 and printed nothing; it was run again"
    assert note in done.stdout.splitlines(), done.stdout
    if always:  # the second failure is the verdict, with what is known
        assert done.returncode == 5 and "perf record exited 255 and printed nothing" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert "note" in sections(done.stdout) and "report" in sections(done.stdout)


@pytest.mark.skipif(
    shutil.which("setpriv") is None or os.geteuid() != 0 or shutil.which("perf") is None,
    reason="needs root, perf and setpriv (to drop to nobody)",
)
def test_the_sampler_says_when_perf_is_not_permitted() -> None:
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if paranoid <= 1:
        pytest.skip("kernel.perf_event_paranoid allows it here")
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    target = subprocess.Popen([*drop, "sleep", "30"])
    try:
        argv = ["/bin/sh", "-c", script(), "hostprof.sh", "run", "kvmlab_x", "1", "199"]
        done = subprocess.run(
            [*drop, *argv, str(target.pid)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        target.kill()
        target.wait()
    assert done.returncode == 6, done.stderr
    assert f"kernel.perf_event_paranoid is {paranoid} and this is not root" in done.stderr
    error = run_failure(6, done.stderr, None, "lab/vm", [])
    assert isinstance(error, HostError)
    assert error.fix[0] == "run kvmlab as root"
    assert "sysctl -w kernel.perf_event_paranoid=1" in error.fix[1]


def test_other_failures_name_the_step_and_the_lines() -> None:
    record = run_failure(5, "perf: some failure\nmore\n", None, "lab/vm", ["sh", "-c", "S", "x"])
    assert isinstance(record, ProcessFailure) and record.what == "perf record failed: more"
    assert record.argv == ["sh", "-c", "<hostprof.sh>", "x"], "not the whole script"
    report = run_failure(7, "kvmlab-hostprof: bad\n", None, "lab/vm", [])
    assert isinstance(report, ProcessFailure) and report.what == "perf report failed: bad"
    assert isinstance(run_failure(3, "no process 9\n", None, "lab/vm", []), RuntimeFailure)


def test_commands_refuse_names_and_pids_the_script_would_refuse() -> None:
    argv = run_argv("kvmlab_1_2", 4, 199, "@/run/kvmlab/lab/l1/idle/qemu.pid")
    pid_file = "@/run/kvmlab/lab/l1/idle/qemu.pid"
    assert argv[3:] == ["hostprof.sh", "run", "kvmlab_1_2", "4", "199", pid_file]
    assert clean_argv("kvmlab_1_2", "42")[3:] == ["hostprof.sh", "clean", "kvmlab_1_2", "42"]
    for bad in (("x", 4, "1"), ("kvmlab_1", float("nan"), "1"), ("kvmlab_1", 4, "1;x")):
        with pytest.raises(UsageError, match=r"not a|window"):
            run_argv(bad[0], bad[1], 199, bad[2])
    assert "-p $(cat /run/q.pid)" in record_command("@/run/q.pid", 4, 199)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("perf") is None, reason="needs root and perf")
def test_a_killed_run_is_cleaned_up() -> None:
    """The recorder outlives a sampler killed with SIGKILL (as kvmlab kills an interrupted
    guest command); 'clean' stops it and removes its directory, and nothing else."""
    target = subprocess.Popen(["sleep", "60"])
    name = f"kvmlab_test_{os.getpid()}"
    other = Path(f"/tmp/{name}x.keep")  # another name's directory is never touched
    other.mkdir()
    run = subprocess.Popen(
        ["/bin/sh", "-c", script(), "hostprof.sh", "run", name, "30", "199", str(target.pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not list(Path("/tmp").glob(f"{name}.*/perf.pid")):
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.1)
        (pid_file,) = Path("/tmp").glob(f"{name}.*/perf.pid")
        recorder = int(pid_file.read_text())
        run.kill()
        run.wait()
        assert Path(f"/proc/{recorder}").exists(), "perf record outlives the killed sampler"
        done = sampler("clean", name, str(target.pid))
        assert done.returncode == 0, done.stderr
        assert not list(Path("/tmp").glob(f"{name}.*")) and other.is_dir()
        deadline = time.monotonic() + 20
        while Path(f"/proc/{recorder}").exists() and "Z" not in _state(recorder):
            assert time.monotonic() < deadline, "clean stops the recorder"
            time.sleep(0.1)
    finally:
        run.kill()
        target.kill()
        target.wait()
        other.rmdir()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return "Z"


# -- the command ------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("perf") is None, reason="needs root and perf")
def test_the_command_samples_a_guests_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a stand-in guest (a sleeping process, no agent): the script, perf and the parser
    end to end, -o json and text, and nothing left in /tmp."""
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path))
    before = set(Path("/tmp").glob("kvmlab_*"))
    with running_guest("lab") as run_dir:
        pid = json.loads((run_dir / "guest.json").read_text())["pid"]
        args = ["exits", "lab/vm1", "--host-profile", "--seconds", "0.5"]
        done = subprocess.run(
            [KVMLAB, *args, "-o", "json"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        text = subprocess.run([KVMLAB, *args], capture_output=True, text=True, timeout=120)
    assert (doc["schema"], doc["where"], doc["accel"]) == (
        "kvmlab.host-profile/1",
        "this host",
        "tcg",
    )
    assert [t["tid"] for t in doc["threads"]] == [pid]
    assert doc["guest_cpu_percent"] is None and doc["findings"] == []
    assert "the guest's own CPU is unknown: it has no agent socket" in doc["notes"]
    assert f"-p {pid} -- sleep 0.5" in doc["perf"]["command"]
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("lab/vm1: its QEMU's host CPU sampled for 0.5 s on this host")
    assert "no rule fired" in text.stdout
    assert set(Path("/tmp").glob("kvmlab_*")) == before


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--live"], "--host-profile takes no --live"),
        (["--provider", "perf"], "--host-profile takes no --provider"),
        (["--import", "x.txt"], "--host-profile takes no --import"),
        (["--seconds", "0"], "--seconds must be between 0.1 and 3600, not 0"),
    ],
)
def test_host_profile_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], expected: str
) -> None:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path))
    done = subprocess.run(
        [KVMLAB, "exits", "lab/vm1", "--host-profile", *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert expected in done.stderr, done.stderr
    bare = subprocess.run(
        [KVMLAB, "exits", "--host-profile"], capture_output=True, text=True, timeout=60
    )
    assert "--host-profile needs the guest's address" in bare.stderr


def test_every_json_key_is_documented() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "json-output.md").read_text()
    section = docs.split("## `kvmlab exits ADDRESS --host-profile -o json`", 1)[1]
    section = section.split("\n## ", 1)[0]
    doc = build(GUEST_ROWS.read_text(), "lab/l2", "inside lab/l1", "kvm", 1.0, 200, "perf")
    top = doc.to_json()
    keys = set(top) | {"findings", "unchecked"}
    keys |= set(top["threads"][0]) | set(top["symbols"][0]) | set(top["perf"])
    keys |= set(top["classes"]["guest"]) | set(top["threads"][0]["proc"] or {})
    missing = sorted(k for k in keys if f"`{k}`" not in section)
    assert missing == []
