"""A level failing part-way through ``kvmlab run``: what was measured before is printed and
written (marked incomplete, the failure named), after teardown, and the error's own exit
status is kept. Guests are stand-ins answering with recorded tool output; the store, the
runner, the CLI and the renderers are the real ones."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape as html_escape
from pathlib import Path
from typing import Any

import pytest

import kvmlab.bench.session as session
from kvmlab.bench.executor import Completed, HostExecutor
from kvmlab.cli.main import main
from kvmlab.errors import RuntimeFailure
from kvmlab.guest.agent import ExecResult
from kvmlab.results.store import ResultStore
from kvmlab.runtime import lab as labrun
from kvmlab.runtime import nested
from kvmlab.runtime.machine import MachineConfig
from tests.bench.recorded import recorded

LAB = """
name = "deep"
[guests.l1]
nested = true
memory = "2G"
[guests.l1.guests.l2]
memory = "1G"
[bench]
workloads = ["cpu", "boot"]
repetitions = 2
"""
INNER_ERROR = (
    b"accelerator for accel=auto: kvm (KVM works here)\n"
    b"kvmlab: deep/l1/l2: the guest's init failed\n"
    b"kvmlab:   command: qemu-system-x86_64 -name deep/l1/l2\n"
)
BOOT = {"qemu": 0.3, "kernel": 2.1, "init": 1.2, "agent": 0.4, "total": 4.0}


def sysbench(argv: list[str]) -> str:
    """sysbench cpu's recorded output for the thread count asked."""
    one = "--threads=1" in argv
    return recorded("sysbench-cpu-threads1.txt" if one else "sysbench-cpu-threads2.txt")


class RecordedHost(HostExecutor):
    """L0 answering from recordings instead of running sysbench on the test machine."""

    def run(self, argv: list[str], timeout: float) -> Completed:
        return Completed(argv, 0, sysbench(argv), "")


class StandIn:
    """A running L1 as the bench code sees it: its config, boot stages and agent."""

    def __init__(self, config: MachineConfig, interrupt_at: str | None) -> None:
        self.config = config
        self.boot = dict(BOOT)
        self.run_dir = config.run_dir
        self.interrupt_at = interrupt_at

    def level_factor(self) -> float:
        return 1.0

    def exec(self, argv: list[str], timeout: float = 600.0, **_: Any) -> ExecResult:
        if self.interrupt_at is not None and self.interrupt_at in argv:
            raise KeyboardInterrupt  # what the CLI's signal handler raises on Ctrl-C
        return ExecResult(0, sysbench(argv).encode(), b"")


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("KVMLAB_RESULTS", str(tmp_path / "results.sqlite"))
    monkeypatch.setattr(session, "HostExecutor", RecordedHost)
    path = tmp_path / "deep.toml"
    path.write_text(LAB)
    return path


def stand_in(
    monkeypatch: pytest.MonkeyPatch,
    events: list[str],
    html: Path,
    interrupt_at: str | None = None,
    teardown_fails: bool = False,
) -> None:
    """L1 boots as a stand-in; starting L2 inside it fails as the real inner kvmlab does."""

    @contextmanager
    def started(loaded: Any, launch: Any, **kw: Any) -> Iterator[list[StandIn]]:
        launch.progress.step("starting deep/l1 (tcg: test host)")
        config = MachineConfig(
            "deep",
            ("l1",),
            ["qemu"],
            Path("/nowhere"),
            "tcg",
            "test host",
            1,
            2 << 30,
            boots_image=False,
            children=True,
        )
        try:
            yield [StandIn(config, interrupt_at)]
        finally:
            events.append(f"teardown (report written: {html.exists()})")
            if teardown_fails:
                raise RuntimeFailure(
                    "could not stop deep/l1; its state is kept: 'kvmlab down deep'"
                )

    def start_nested(machine: StandIn, *args: Any) -> list[Any]:
        argv = nested.kvmlab_argv("up", "deep.toml", "--within", "l1", "--json")
        failed = ExecResult(3, b"", INNER_ERROR)
        raise nested.inner_failure(failed, argv, "deep/l1: starting its guests failed")

    monkeypatch.setattr(labrun, "started", started)
    monkeypatch.setattr(labrun, "start_nested", start_nested)


def kvmlab(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``kvmlab ARGS`` through the real entry point."""
    monkeypatch.setattr(sys, "argv", ["kvmlab", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_l2_failing_keeps_l0_and_l1_in_table_and_report(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    events: list[str] = []
    stand_in(monkeypatch, events, html)
    status, out, err = kvmlab(monkeypatch, capsys, "run", str(lab), "--out", str(html))

    assert status == 3, "a component failed: the error's own exit status"
    assert events == ["teardown (report written: False)"], "torn down before the report"
    failure = (
        "L2 l1/l2 failed while booting: deep/l1: starting its guests failed inside the "
        "guest: deep/l1/l2: the guest's init failed"
    )
    title = "kvmlab run 1: lab deep, suite quick (INCOMPLETE: L2 l1/l2 failed while booting; "
    assert title in out
    header = next(line for line in out.splitlines() if line.startswith("workload"))
    columns = re.split(r" {2,}", header)[-3:]
    assert columns == ["L0 host (native)", "L1 l1 (tcg)", "L2 l1/l2 (failed)"]
    cpu = next(line for line in out.splitlines() if "1thread_events_per_s" in line)
    assert cpu.split()[-1] == "-", "nothing was measured at L2"
    assert failure in out.splitlines()
    assert "incomplete run 1 stored in" in out and f"HTML report: {html}" in out

    lines = [re.sub(r"^\[ *\d+ s\] ", "[t] ", line) for line in err.splitlines()]
    stages = [line for line in lines if line.startswith("[t] ")]
    assert stages[:2] == [
        "[t] L0 host cpu done (0.0 s; 1thread_events_per_s 3041 events/s)",
        "[t] starting deep/l1 (tcg: test host)",
    ]
    assert stages[2:] == [
        "[t] L1 deep/l1 booted (tcg, 4.0 s to its agent)",
        "[t] L1 deep/l1 cpu done (0.0 s; 1thread_events_per_s 3041 events/s)",
        "[t] L2 deep/l1/l2 failed while booting: deep/l1: starting its guests failed inside "
        "the guest: deep/l1/l2: the guest's init failed",
        "[t] stopping deep/l1",
    ]
    why = "starting its guests failed inside the guest: deep/l1/l2: the guest's init failed"
    assert f"kvmlab: deep/l1: {why}" in lines
    assert "kvmlab:   | kvmlab: deep/l1/l2: the guest's init failed" in lines

    page = html.read_text()
    assert "Incomplete run" in page and html_escape(why) in page
    assert "deep/l1/l2: the guest&#x27;s init failed" in page, "the error's detail, escaped"
    assert '<th scope="col" class="num failed">L2 l1/l2 (failed)</th>' in page

    with ResultStore() as store:
        run = store.run(1)
        assert not run.complete and run.ended is not None
        [stored] = run.failures
        assert (stored.level, stored.guest, stored.stage, stored.exit_code) == (
            "L2",
            "l1/l2",
            "boot",
            3,
        )
        assert {s.level for s in store.samples(1)} == {"L0", "L1"}


def test_json_carries_the_failure(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in(monkeypatch, [], tmp_path / "r.html")
    status, out, _ = kvmlab(
        monkeypatch, capsys, "run", str(lab), "--out", str(tmp_path / "r.html"), "-o", "json"
    )
    assert status == 3
    report = json.loads(out)
    [run] = report["runs"]
    assert run["complete"] is False
    assert [(f["level"], f["guest"], f["stage"]) for f in run["failures"]] == [
        ("L2", "l1/l2", "boot")
    ]
    assert {r["level"] for r in report["rows"]} == {"L0", "L1"}


def test_a_failing_teardown_is_named_too_and_loses_nothing(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    stand_in(monkeypatch, [], html, teardown_fails=True)
    status, out, err = kvmlab(monkeypatch, capsys, "run", str(lab), "--out", str(html))
    assert status == 3
    notes = [line for line in out.splitlines() if re.match(r"L\d \S+ failed ", line)]
    assert notes == [
        "L2 l1/l2 failed while booting: deep/l1: starting its guests failed inside the guest: "
        "deep/l1/l2: the guest's init failed",
        "L1 l1 failed while tearing down: could not stop deep/l1; its state is kept: "
        "'kvmlab down deep'",
    ]
    assert "could not stop deep/l1" in html.read_text()
    assert err.splitlines()[-1].startswith("kvmlab: could not stop deep/l1")


def test_ctrl_c_keeps_what_was_measured_and_exits_130(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    events: list[str] = []
    stand_in(monkeypatch, events, html, interrupt_at="--threads=1")
    status, out, err = kvmlab(monkeypatch, capsys, "run", str(lab), "--out", str(html))
    assert status == 130
    assert events == ["teardown (report written: False)"]
    assert "L1 l1 interrupted during cpu: Ctrl-C, SIGTERM or SIGHUP arrived" in out.splitlines()
    header = next(line for line in out.splitlines() if line.startswith("workload"))
    assert re.split(r" {2,}", header)[-2:] == ["L0 host (native)", "L1 l1 (tcg) interrupted"]
    cpu = next(line for line in out.splitlines() if "1thread_events_per_s" in line)
    assert cpu.split()[-1] == "-", "L1's boot was measured, its cpu not"
    assert "interrupted while benchmarking deep" in err.splitlines()[-1]
    assert html.is_file()
