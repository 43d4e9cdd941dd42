"""``exits --import`` refuses a report whose rows contradict themselves:
a minimum above its maximum or an average outside them (beyond perf's 0.01 us rounding),
and a reason (port, address) listed twice in one table, which perf kvm stat never prints
and which showed as two rows. One line each, naming the file, the line, the row and the
field (both lines for a repeat). Each screen of a ``live`` log is a table of its own.
Nothing boots."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvmlab.errors import UsageError
from kvmlab.exits import perfkvm
from kvmlab.exits.perfkvm import MAX_TRACKED, import_file, parse_report
from tests.exits.test_cli_inputs import cli
from tests.exits.test_import_bounds import HEAD, row

FIX = "import the report as perf printed it"
EDITED = f"perf prints min <= avg <= max, so the row was edited or damaged: {FIX}"


def refusal(tmp_path: Path, text: str) -> str:
    report = tmp_path / "r.txt"
    report.write_text(text)
    with pytest.raises(UsageError) as caught:
        import_file(report, "x", 1.0)
    message = str(caught.value)
    assert message.startswith(f"{report}: ") and "\n" not in message
    return message.removeprefix(f"{report}: ")


@pytest.mark.parametrize(
    ("times", "why"),
    [
        ("9.00us 1.00us 4.00us", "min time 9.00us is above max time 1.00us"),
        ("1.00us 9.00us 40.00us", "avg time 40.00us is above max time (1.00us to 9.00us)"),
        ("5.00us 9.00us 4.00us", "avg time 4.00us is below min time (5.00us to 9.00us)"),
    ],
)
def test_a_row_that_contradicts_itself_is_refused(tmp_path: Path, times: str, why: str) -> None:
    text = HEAD + row("CPUID", 3) + row("HLT", 5, times)
    assert refusal(tmp_path, text) == f"line 3 (HLT): {why}; {EDITED}"


def test_perfs_rounding_is_not_a_contradiction() -> None:
    text = HEAD + row("HLT", 5, "1.00us 9.00us 9.01us") + row("CPUID", 1, "2.00us 2.00us 2.00us")
    assert parse_report(text, "x", 1.0).total == 6


def test_a_reason_listed_twice_names_both_lines(tmp_path: Path) -> None:
    text = HEAD + row("HLT", 5) + row("CPUID", 5) + row("HLT", 7)
    assert refusal(tmp_path, text) == (
        f"line 4: HLT is listed a second time in its table (first on line 2); perf kvm stat "
        f"lists each once: {FIX}"
    )


def test_a_port_listed_twice_in_another_spelling(tmp_path: Path) -> None:
    text = "IO Port Access Samples Samples% Time% Min Time Max Time Avg time\n"
    text += row("0x608:PIN", 5) + row("0x0608:pin", 6)
    assert refusal(tmp_path, text).startswith("line 3: 0x0608:pin is listed a second time")


def test_each_screen_of_a_live_log_is_its_own_table() -> None:
    text = HEAD + row("HLT", 5) + row("CPUID", 1) + "\n" + HEAD + row("HLT", 7)
    profile = parse_report(text, "x", 1.0)
    assert [(r.reason, r.count) for r in profile.reasons] == [("HLT", 7)]


def test_a_repeat_is_caught_past_the_rows_remembered(tmp_path: Path) -> None:
    """Beyond :data:`MAX_TRACKED` keys a table remembers the rows it shows: a repeat that
    would show as two rows is still refused; one of an early key too."""
    many = "".join(row(f"R{i}", 1) for i in range(MAX_TRACKED + 10))
    late = HEAD + many + row("LATE", 900) + row("LATE", 800)
    line = MAX_TRACKED + 10 + 3
    assert refusal(tmp_path, late).startswith(
        f"line {line}: LATE is listed a second time in its table (first on line {line - 1})"
    )
    early = HEAD + many + row("R3", 5)
    assert refusal(tmp_path, early).startswith(
        f"line {MAX_TRACKED + 12}: R3 is listed a second time in its table (first on line 5)"
    )


def test_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.txt"
    report.write_text(HEAD + row("HLT", 5, "9.00us 1.00us 4.00us"))
    proc = cli(capsys, "exits", "--import", str(report), "--seconds", "1")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"kvmlab: {report}: line 2 (HLT): min time 9.00us is above max time 1.00us; {EDITED}\n"
    )


def test_a_perf_data_file_names_perfs_report_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    perf = bin_dir / "perf"
    printed = HEAD + row("HLT", 5) + row("HLT", 6)
    perf.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"sys.stdout.write({printed!r} if '--event=vmexit' in sys.argv else '')\n"
    )
    perf.chmod(0o755)
    data = tmp_path / "perf.data"
    data.write_bytes(perfkvm.PERF_MAGIC + bytes(200))
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    proc = cli(capsys, "exits", "--import", str(data), "--seconds", "1")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(
        f"kvmlab: {data} (perf's report of it): line 3: HLT is listed a second time"
    )


def test_the_recorded_perf_reports_still_import() -> None:
    data = Path(__file__).parent / "data"
    for name in (
        "perf-kvm-stat-live-seed001-before.txt",
        "perf-kvm-stat-live-seed001-after.txt",
        "perf-kvm-stat-report-timer-storm-l2.txt",
    ):
        assert import_file(data / name, "x", 1.0).total > 0
