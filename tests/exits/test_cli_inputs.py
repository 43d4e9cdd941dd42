"""``kvmlab exits`` and ``kvmlab diagnose`` against what a hostile user types, and the
providers' parsers against odd input: one ``kvmlab:`` line, the README's exit codes,
nothing on stdout, nothing written, and no guest booted (every case fails before one is
needed; the ``--compare`` cases run without QEMU on PATH, so a regression cannot boot one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvmlab.errors import HostError, QmpFailure, UsageError
from kvmlab.exits import qstats, tracepoints
from kvmlab.exits.cputime import ThreadTimes, add_guest_side
from kvmlab.exits.model import CpuWindow
from kvmlab.exits.pcimap import iomem_regions, pci_regions
from kvmlab.exits.perfkvm import parse_report
from tests.conftest import LABS, ROOT
from tests.fakeguest import running_guest

KVMLAB = str(Path(sys.executable).with_name("kvmlab"))
DATA = Path(__file__).parent / "data"
LIVE = DATA / "perf-kvm-stat-live-seed001-before.txt"
EXITS = ROOT / "src" / "kvmlab" / "exits"


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private run directory (no lab is up in it), for this process and the CLI."""
    path = tmp_path / "run"
    path.mkdir()
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(path))
    yield path


def kvmlab(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed command, stdout and stderr piped, stdin closed."""
    return subprocess.run(
        [KVMLAB, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "60", **env},
    )


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The same command line through ``main`` in this process (its error printing and exit
    codes included): argument checks need no second interpreter."""
    from kvmlab.cli.main import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["kvmlab", *args])
        with pytest.raises(SystemExit) as ended:
            main()
    out, err = capsys.readouterr()
    code = ended.value.code
    return subprocess.CompletedProcess(args, code if isinstance(code, int) else 1, out, err)


def one_line(proc: subprocess.CompletedProcess[str], status: int) -> str:
    """The single ``kvmlab:`` line of a failed command (stdout empty), checked."""
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("kvmlab: ")
    return line.removeprefix("kvmlab: ")


# -- kvmlab exits / diagnose: arguments ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["exits"], "give a running guest's address (LAB/GUEST)"),
        (["exits", "../x"], "is not a guest address"),
        (["exits", "a/b/../c"], "is not a guest address"),
        (["exits", "a" * 300], "(300 characters) is not a guest address"),
        (["exits", "lab/vm1"], "no running guest lab/vm1 (lab lab is not up: kvmlab up lab"),
        (["exits", "lab/vm1", "--seconds", "nan"], "--seconds must be between 0.1 and 3600"),
        (["exits", "lab/vm1", "--seconds", "0"], "--seconds must be between"),
        (["exits", "lab/vm1", "--seconds", "-1"], "--seconds must be between"),
        (["exits", "lab/vm1", "--seconds", "inf"], "--seconds must be between"),
        (["exits", "lab/vm1", "--seconds", "1e9"], "--seconds must be between"),
        (
            ["exits", "lab/vm1", "--provider", "bogus"],
            "Invalid value for --provider: choose auto, tracepoints, counters or perf "
            "(got 'bogus')",
        ),
        (["exits", "lab/vm1", "-o", "yaml"], "Invalid value for --output"),
        (["exits", "lab/vm1", "--live", "-o", "json"], "--live prints tables"),
        (
            ["exits", "lab/vm1", "--guest", "vm1"],
            "--guest, --settle and --variant go with LAB --compare",
        ),
        (
            ["exits", "lab/vm1", "--settle", "1"],
            "--guest, --settle and --variant go with LAB --compare",
        ),
        (["diagnose"], "give the guest's address (LAB/GUEST) or --import FILE"),
        (["diagnose", "lab/vm1", "--import", str(LIVE)], "or --import FILE, not both"),
        (["diagnose", "../x"], "is not a guest address"),
        (["diagnose", "lab/vm1", "--seconds", "nan"], "--seconds must be between 0.1 and 3600"),
        (["diagnose", "lab/vm1", "--provider", "bogus"], "Invalid value for --provider"),
        (["diagnose", "lab/vm1", "--out", "x.toml"], "--out names the lab file --apply writes"),
        (
            ["diagnose", "--import", str(LIVE), "--seconds", "1", "--apply"],
            "--import takes no --apply",
        ),
        (["diagnose", "--import", str(LIVE), "-s", "1", "--out", "x"], "--import takes no --out"),
        (["diagnose", "lab/vm1", "--within", "lab/l1"], "--within goes with pid:N"),
        (["diagnose", "domain:w", "--within", "lab/l1"], "--within goes with pid:N"),
        (
            ["diagnose", "pid:1", "--within", "lab/l1", "--import", str(LIVE), "-s", "1"],
            "give it or --import FILE, not both",
        ),
        (["diagnose", "pid:1", "--apply"], "for a QEMU started by hand, change its command"),
        (["diagnose", "domain:w", "--apply", "--out", "x.toml"], "--out names a lab file"),
        (["diagnose", "pid:1", "-c", "qemu:///system"], "-c/--connect goes with domain:NAME"),
    ],
)
def test_bad_arguments_are_one_line(
    run_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    assert expected in one_line(cli(capsys, *args), 2)


def test_bad_arguments_through_the_installed_command(run_dir: Path) -> None:
    assert one_line(kvmlab("exits", "lab/vm1", "--provider", "bogus"), 2) == (
        "Invalid value for --provider: choose auto, tracepoints, counters or perf (got "
        "'bogus') (see 'kvmlab exits --help')"
    )
    assert "--seconds must be between" in one_line(kvmlab("diagnose", "x/y", "-s", "nan"), 2)


@pytest.mark.parametrize("command", ["exits", "diagnose"])
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], "--import needs --seconds"),
        (["--seconds", "nan"], "--seconds must be between 0.001 and 1e+06, not nan"),
        (["--seconds", "0"], "--seconds must be between"),
        (["--seconds", "1", "--provider", "perf"], "--import takes no --provider"),
    ],
)
def test_import_window_is_given_and_sane(
    capsys: pytest.CaptureFixture[str], command: str, extra: list[str], expected: str
) -> None:
    assert expected in one_line(cli(capsys, command, "--import", str(LIVE), *extra), 2)


@pytest.mark.parametrize("extra", [["--live"], ["--compare", "x.toml"], ["--guest", "l1"]])
def test_import_takes_no_live_options(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    line = one_line(cli(capsys, "exits", "--import", str(LIVE), "--seconds", "1", *extra), 2)
    assert line == f"--import takes no {extra[0]}"


# -- --import: files that are not reports -------------------------------------------------


def test_import_refuses_what_is_not_a_report(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nothing writes it: reading it would hang
    binary = tmp_path / "binary"
    binary.write_bytes(bytes(range(256)) * 8)
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB that must never be read
    cases = {
        tmp_path / "missing": "cannot read {}: No such file or directory",
        tmp_path: "cannot import {}: a directory; give a saved perf kvm stat report (text) "
        "or perf.data file",
        Path("/dev/zero"): "cannot import {}: a character device;",
        fifo: "cannot import {}: a named pipe;",
        binary: "{}: a binary file, neither a perf kvm stat report (text) nor a perf.data file",
        huge: "{}: over 16 MiB, too large for a perf kvm stat report text",
        LABS / "basic.toml": "{}: no perf kvm stat table found",
    }
    for path, expected in cases.items():
        line = one_line(kvmlab("exits", "--import", str(path), "--seconds", "1", timeout=20), 2)
        assert line.startswith(expected.format(path)), line
    for path in (fifo, huge):
        line = one_line(kvmlab("diagnose", "--import", str(path), "-s", "1", timeout=20), 2)
        assert line.startswith(cases[path].format(path)), line


def test_perf_data_without_perf_is_a_missing_tool(tmp_path: Path) -> None:
    data = tmp_path / "perf.data"
    data.write_bytes(b"PERFILE2" + bytes(200))
    empty = tmp_path / "bin"
    empty.mkdir()
    line = one_line(kvmlab("exits", "--import", str(data), "--seconds", "1", PATH=str(empty)), 3)
    assert line.startswith("perf is not installed; install it with: apt-get install linux-perf")


@pytest.mark.skipif(shutil.which("perf") is None, reason="needs perf")
def test_perf_data_perf_cannot_read_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "perf.data"
    data.write_bytes(b"PERFILE2" + bytes(200))
    line = one_line(kvmlab("exits", "--import", str(data), "--seconds", "1"), 2)
    assert line.startswith(
        f"{data}: starts like a perf.data file, but this host's perf cannot read it"
    )
    assert "rerun with -v" not in line  # perf's own advice, not kvmlab's


# -- output ---------------------------------------------------------------------------------


def test_piped_import_prints_every_value_whole() -> None:
    proc = kvmlab("exits", "--import", str(LIVE), "--seconds", "1", COLUMNS="40")
    assert proc.returncode == 0 and proc.stderr == ""
    assert f"{LIVE}: 70746 VM exits in 1.0 s (70746/s), VMX" in proc.stdout
    for reason, count in (
        ("IO_INSTRUCTION", 55654),
        ("TPR_BELOW_THRESHOLD", 82),
        ("PAUSE_INSTRUCTION", 5),
    ):
        row = next(line for line in proc.stdout.splitlines() if line.startswith(reason + " "))
        assert str(count) in row.split()
    assert "15227.8" in proc.stdout  # HLT's max handling time in us, not cut


@pytest.mark.parametrize("command", ["exits", "diagnose"])
def test_json_is_one_document(command: str) -> None:
    proc = kvmlab(command, "--import", str(LIVE), "--seconds", "1", "-o", "json")
    assert proc.returncode == 0 and proc.stderr == ""
    data = json.loads(proc.stdout)  # the whole of stdout: one document, nothing else
    profile = data if command == "exits" else data["profile"]
    assert (
        profile["schema"] == "kvmlab.exits/1"
        and profile["total"] == 70746
        and profile["seconds"] == 1.0
    )


# -- a guest that is up (a stand-in: no QEMU) -----------------------------------------------


def test_tcg_guest_has_no_exits(run_dir: Path) -> None:
    with running_guest("basic"):
        assert "runs under TCG" in one_line(kvmlab("exits", "basic/vm1", "-s", "1"), 4)
        assert "runs under TCG" in one_line(kvmlab("diagnose", "basic/vm1", "-s", "1"), 4)


def test_apply_out_is_refused_before_profiling(run_dir: Path, tmp_path: Path) -> None:
    existing = tmp_path / "existing.toml"
    existing.write_text("# mine\n")
    missing = tmp_path / "missing" / "fixed.toml"
    cases = {
        existing: f"--out {existing} exists; kvmlab does not overwrite it: name a new file",
        Path("/dev/full"): "--out /dev/full exists; kvmlab does not overwrite it",
        tmp_path: f"--out {tmp_path} is a directory; give a file name",
        missing: f"--out {missing}: directory {missing.parent} does not exist",
    }
    with running_guest("basic"):  # under TCG: profiling it would fail with exit 4
        for out, expected in cases.items():
            line = one_line(kvmlab("diagnose", "basic/vm1", "--apply", "--out", str(out)), 2)
            assert line.startswith(expected), line
    assert existing.read_text() == "# mine\n" and not missing.parent.exists()


# -- --compare: refused before the first variant boots ---------------------------------------


@pytest.fixture
def no_qemu(tmp_path: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment in which nothing can boot: no QEMU on PATH, an empty image cache."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("KVMLAB_CACHE", str(tmp_path / "cache"))


def _lab(tmp_path: Path, variants: bool) -> Path:
    text = (LABS / "basic.toml").read_text().replace("disks/vm1.qcow2", str(tmp_path / "d.qcow2"))
    if variants:
        text += "\n[variants.before]\n\n[variants.after.guests.vm1]\nvcpus = 1\n"
    lab = tmp_path / ("variants.toml" if variants else "plain.toml")
    lab.write_text(text)
    return lab


@pytest.mark.usefixtures("no_qemu")
def test_compare_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab, plain = str(_lab(tmp_path, True)), str(_lab(tmp_path, False))
    cases = [
        ([str(tmp_path / "missing.toml"), "--compare", "--guest", "vm1"], "no such file"),
        (
            [plain, "--compare", "--guest", "vm1"],
            f"{plain}: nothing to compare (kvmlab diagnose --apply writes a variant)",
        ),
        ([lab, "--compare", "--guest", "nope"], "lab basic has no guest 'nope' (its guests: vm1"),
        ([lab, "--compare", "--guest", "vm1/"], "lab basic has no guest 'vm1/'"),
        ([lab, "--compare"], "kvmlab exits LAB --compare --guest PATH"),
        (["--compare", "--guest", "vm1"], "kvmlab exits LAB --compare --guest PATH"),
        ([lab, "--compare", "--guest", "vm1", "--live"], "--compare takes no --live"),
        ([lab, "--compare", "--guest", "vm1", "--seconds", "nan"], "--seconds must be between"),
        (
            [lab, "--compare", "--guest", "vm1", "--settle", "-1"],
            "--settle must be between 0 and 3600, not -1",
        ),
    ]
    for args, expected in cases:
        assert expected in one_line(cli(capsys, "exits", *args), 2), args


# -- what reaches the tracer's shell ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "seconds", "pid"),
    [
        ("../x", 1.0, "1"),
        ("kvmlab_", 1.0, "1"),
        ("kvmlab_a b", 1.0, "1"),
        ("x_lat", 1.0, "1"),
        ("kvmlab_" + "a" * 49, 1.0, "1"),
        ("kvmlab_a", float("nan"), "1"),
        ("kvmlab_a", 0.0, "1"),
        ("kvmlab_a", 1e9, "1"),
        ("kvmlab_a", 1.0, "1;rm"),
        ("kvmlab_a", 1.0, "@rel/pid"),
        ("kvmlab_a", 1.0, "@/run/x\n1"),
        ("kvmlab_a", 1.0, ""),
    ],
)
def test_tracer_arguments_are_checked(name: str, seconds: float, pid: str) -> None:
    from kvmlab.exits.perfkvm import record_argv

    with pytest.raises(UsageError):
        tracepoints.run_argv(name, seconds, pid)
    with pytest.raises(UsageError):
        record_argv(pid, seconds, name)


def test_tracer_arguments_that_pass() -> None:
    argv = tracepoints.run_argv("kvmlab_123_456", 0.5, "@/run/kvmlab/ts/l1/idle/qemu.pid")
    assert argv[-3:] == ["kvmlab_123_456", "0.5", "@/run/kvmlab/ts/l1/idle/qemu.pid"]
    assert tracepoints.clean_argv("kvmlab_bench_9")[-1] == "kvmlab_bench_9"


SHELLS = [s for s in ("dash", "bash", "busybox") if shutil.which(s)]


@pytest.mark.parametrize("script", ["trace.sh", "perf.sh"])
@pytest.mark.parametrize("shell", SHELLS)
def test_scripts_parse(script: str, shell: str) -> None:
    argv = [shell, "sh", "-n"] if shell == "busybox" else [shell, "-n"]
    proc = subprocess.run(
        [*argv, str(EXITS / script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("args", "status"),
    [
        ([], 2),
        (["run"], 2),
        (["run", "../x", "1", "1"], 2),
        (["clean", "../x"], 2),
        (["clean", ""], 2),
        (["clean", "other_tool"], 2),
        (["clean", "kvmlab_a/../b"], 2),
        (["run", "kvmlab_a", "1"], 2),
        (["run", "kvmlab_a", "nan", "1"], 2),
        (["run", "kvmlab_a", "1e9", "1"], 2),
        (["run", "kvmlab_a", "1", "1;x"], 3),
        (["run", "kvmlab_a", "1", "@relative"], 3),
        (["bogus", "kvmlab_a"], 2),
    ],
)
def test_trace_sh_refuses_before_touching_tracefs(args: list[str], status: int) -> None:
    """Every case ends before the script reads or writes tracefs."""
    script = (EXITS / "trace.sh").read_text()
    proc = subprocess.run(
        ["sh", "-c", script, "trace.sh", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == status, proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["1", "1"],
        ["1", "1", "../x"],
        ["1", "1", "kvmlab_a;b"],
        ["1", "nan", "kvmlab_a"],
        ["1;x", "1", "kvmlab_a"],
        ["@relative", "1", "kvmlab_a"],
    ],
)
def test_perf_sh_refuses_bad_arguments(args: list[str]) -> None:
    script = (EXITS / "perf.sh").read_text()
    proc = subprocess.run(
        ["sh", "-c", script, "perf.sh", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode in (2, 3), proc.stderr
    assert proc.stdout == ""


# -- parsers on odd input ----------------------------------------------------------------------


def test_perf_live_log_keeps_the_last_screen_of_every_table() -> None:
    def screen(port: str, count: int) -> str:
        return (
            "VM-EXIT Samples Samples% Time% Min Time Max Time Avg time\n"
            f"IO_INSTRUCTION {count} 100.00% 100.00% 1.00us 2.00us 1.50us ( +- 1% )\n"
            "IO Port Access Samples Samples% Time% Min Time Max Time Avg time\n"
            f"{port}:PIN {count} 100.00% 100.00% 1.00us 2.00us 1.50us ( +- 1% )\n"
        )

    profile = parse_report(screen("0x70", 5) + screen("0x608", 7), "x", 1.0)
    assert [(p.port, p.count) for p in profile.pio] == [(0x608, 7)]
    assert profile.total == 7


def test_perf_text_with_odd_numbers_is_skipped_not_a_crash() -> None:
    text = (
        "VM-EXIT Samples Samples% Time% Min Time Max Time Avg time\n"
        "HLT 5 1.2.3% 1% 1.0us 2.0us 1.5us\n"
        "HLT 5 .% 1% .us .us .us\n"
        "MSR_READ 3 10.00% 1.00% 1.00us 2.00us 1.50us ( +- 1% )\n"
    )
    profile = parse_report(text, "x", 1.0)
    assert [r.reason for r in profile.reasons] == ["MSR_READ"]


def test_trace_output_with_cut_rows_and_garbage_is_parsed() -> None:
    text = "\n".join(
        [
            "=== cpu-start not-a-number",
            "1 2 3 4 CPU 0/KVM",
            "=== cpu-end 10.0 0",
            "1 2 3 4 CPU 0/KVM",
            "=== hist kvm_exit",
            "# event histogram",
            "{ isa: 2, exit_reason: 120, vcpu_id: 0 } hitcount: 7",
            "{ isa: 2, exit_reason: 120 } hitcount: 9",  # cut short: no vcpu_id
            "{ isa: 2, exit_reason: 120, vcpu_id: 1 }",  # no hitcount
            "Dropped: lots",
            "=== hist kvm_pio",
            "# event histogram",
            "{ port: 1544, rw: 0, size: 4 } hitcount: 5",
            "{ rw: 1 } hitcount: 2",
            "=== hist kvm_msr",
            "# event histogram",
            "{ ecx: 2059 } hitcount: 3",
            "=== hist kvm_mmio",
            "# event histogram",
            "{ gpa: 4275044592 } hitcount: 1",
        ]
    )
    profile = tracepoints.parse_output(text, "x", 5.0)
    assert profile.total == 7 and profile.vcpus == {0: 7}
    assert [(p.port, p.count) for p in profile.pio] == [(0x608, 5)]
    assert profile.msr == [] and profile.mmio == [] and profile.cpu is None


def test_query_stats_of_odd_shapes() -> None:
    reply = [
        {"provider": "kvm"},  # no stats
        {"provider": "kvm", "stats": None},
        {
            "provider": "kvm",
            "stats": [
                {"value": 3},
                {"name": "exits"},
                "x",
                {"name": "halt_exits", "value": [1, 2]},
                {"name": "exits", "value": 4},
            ],
        },
        {"provider": "kvm", "qom-path": "/machine/unattached/device[0]"},
        "not an entry",
    ]
    totals, per_vcpu = qstats.sample(reply)  # type: ignore[arg-type]
    assert totals == {"exits": 4} and per_vcpu == {0: 0}


def test_query_stats_missing_is_a_host_limit() -> None:
    class NotFound(Exception):
        error_class = "CommandNotFound"

    def execute(command: str, args: object = None) -> object:
        raise QmpFailure("QMP query-stats failed: not found") from NotFound()

    with pytest.raises(HostError, match="no QMP query-stats"):
        qstats.query(execute)


def test_iomem_and_query_pci_of_odd_shapes() -> None:
    iomem = "\n".join(
        [
            "00000000-00000000 : PCI Bus 0000:00",  # as read without root: every address zero
            "  00000000-00000000 : 0000:00:01.0",
            "zzzz-0001 : junk",
            "0001-0002-0003 : junk",
            "00002000-00001000 : backwards",
            "no separator",
            "fe000000-fe003fff : 0000:00:02.0",
            "  fe000000-fe003fff : virtio-pci-modern",
        ]
    )
    assert iomem_regions(iomem) == [
        (0xFE000000, 0x4000, "0000:00:02.0"),
        (0xFE000000, 0x4000, "0000:00:02.0 virtio-pci-modern"),
    ]
    odd = [
        {
            "devices": [
                {
                    "bus": "x",
                    "class_info": None,
                    "id": {"vendor": "1af4"},
                    "regions": [
                        {"type": "memory", "address": 1 << 32, "size": 4096},
                        {"type": "memory"},
                        "x",
                    ],
                    "pci_bridge": {"devices": None},
                }
            ]
        },
        {"devices": "x"},
        "x",
    ]
    regions = pci_regions(odd)  # type: ignore[arg-type]
    assert regions == [(1 << 32, 4096, "class 0x0000 (00:00.0) BAR?")]


def test_cpu_snapshots_and_proc_stat_that_are_garbage() -> None:
    with pytest.raises(ValueError):
        ThreadTimes.parse("12.5", "")
    with pytest.raises(ValueError):
        ThreadTimes.parse("12.5 0", "")
    window = CpuWindow(seconds=1.0, host_user=1.0, host_system=0.0, host_guest=0.5)
    add_guest_side(window, "cpu x y z\n", "cpu 1 2 3 4\n", 1.0)
    assert window.guest_busy is None and window.guest_percent is None


def test_apply_leaves_no_half_written_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails (a full disk) removes the file it created, and never one that was
    there before."""
    import errno
    from types import SimpleNamespace

    from kvmlab.cli import diagnose_cmds, hostinfo
    from kvmlab.cli.outfile import OutputError
    from kvmlab.exits import fixes
    from kvmlab.runtime import lab as labrun
    from kvmlab.spec import load_lab

    def full_disk(source: Path, dest: Path, *args: object, **kwargs: object) -> Path:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"name = ")
        os.close(fd)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fixes, "write_variant_lab", full_disk)
    monkeypatch.setattr(
        fixes,
        "fix_renders",
        lambda *a: SimpleNamespace(args_removed=[], args_added=[], xml_changes=[]),
    )
    monkeypatch.setattr(hostinfo, "host_accel", lambda: (None, None))
    monkeypatch.setattr(labrun, "make_target", lambda *a: None)
    monkeypatch.setattr(diagnose_cmds, "image_factory", lambda: lambda: None)
    finding = SimpleNamespace(id="x", title="x", fix=SimpleNamespace(lab={"vcpus": 1}))
    dest = tmp_path / "fixed.toml"
    with pytest.raises(OutputError, match="No space left on device"):
        diagnose_cmds.apply_fix(load_lab(LABS / "basic.toml"), ("vm1",), finding, dest)  # type: ignore[arg-type]
    assert not dest.exists()
