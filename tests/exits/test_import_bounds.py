"""``kvmlab exits --import`` of reports no perf printed: a file of
hundreds of thousands of reasons is read in linear time and bounded memory and shown as a
short table; escape sequences in names never reach the terminal; impossible rows are
skipped and said so; perf's refusals are told in kvmlab's words. Nothing boots."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from rich.console import Console

from kvmlab.errors import UsageError
from kvmlab.exits import perfkvm
from kvmlab.exits.model import Profile, from_json
from kvmlab.exits.perfkvm import MAX_ROWS, import_file, parse_report
from kvmlab.exits.text import show
from tests.exits.test_cli_inputs import cli

HEAD = "VM-EXIT    Samples  Samples%     Time%    Min Time    Max Time         Avg time\n"
ESC = "\x1b]0;pwned\x07\x1b[2JEVIL"  # sets the window title, clears the screen


kvmlab = cli
"""The command line through ``main`` in this process (test_cli_inputs.py's)."""


def row(name: str, count: int | str, times: str = "1.00us 9.00us 4.00us") -> str:
    return f"  {name} {count} 0.01% 0.01% {times} ( +- 1.00% )\n"


def many_reasons(path: Path, n: int) -> Path:
    """A report of ``n`` distinct reasons (53 bytes a row, as the 15 MiB reproduction)."""
    with path.open("w") as f:
        f.write("Analyze events for all VMs, all VCPUs:\n\n" + HEAD + "\n")
        f.writelines(
            f"  EXIT_R_{i:07d} {i % 997 + 1} 0.01% 0.01% 1.00us 9.00us 4.00us\n" for i in range(n)
        )
    return path


def shown(path: Path) -> str:
    """What ``exits --import`` prints for ``path`` into a pipe."""
    out = io.StringIO()
    show(import_file(path, "x", 1.0), Console(file=out, width=120))
    return out.getvalue()


# -- 1. size: linear time, bounded memory, a short table ---------------------------------------


def test_many_reasons_make_a_short_table_that_says_what_it_folded(tmp_path: Path) -> None:
    text = shown(many_reasons(tmp_path / "r.txt", 20_000))
    assert len(text.splitlines()) < 2 * MAX_ROWS  # was one line per reason
    assert (
        f"note: 20,000 exit reasons: the {MAX_ROWS} most frequent listed, the other "
        f"{20_000 - MAX_ROWS:,} ("
    ) in text
    assert f"({20_000 - MAX_ROWS:,} more other reasons)  other" in text


def test_import_time_is_linear_and_memory_bounded(tmp_path: Path) -> None:
    small = many_reasons(tmp_path / "small.txt", 10_000)
    large = many_reasons(tmp_path / "large.txt", 40_000)

    def cpu(path: Path) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()  # this process only: a busy host does not count
            shown(path)
            best = min(best, time.process_time() - start)
        return best

    assert cpu(large) < 8 * cpu(small)  # linear: 4x; quadratic: 16x (3x of 2x was flaky)
    size = small.stat().st_size  # 0.5 MB; tracing every allocation is slow
    tracemalloc.start()
    try:
        shown(small)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size  # was 70 times the file: a row object and a table line per reason


def test_folding_keeps_the_totals_and_each_kind(tmp_path: Path) -> None:
    names = [f"R{i}" for i in range(MAX_ROWS)]
    text = HEAD + "".join(row(n, 100) for n in names)
    text += row("HLT", 5) + row("PENDING_INTERRUPT", 1) + row("UNKNOWN", 7) + row("R_LATE", 3)
    profile = parse_report(text, "x", 1.0)
    assert profile.total == 100 * MAX_ROWS + 5 + 1 + 7 + 3
    assert profile.kind_count("hlt") == 5  # the HLT row, folded into the hlt row
    assert profile.vendor == "vmx"  # from a folded row
    folded = {r.reason: (r.kind, r.count) for r in profile.reasons if r.reason.startswith("(")}
    assert folded == {
        "(1 more hlt reasons)": ("hlt", 5),
        "(1 more interrupt_window reasons)": ("interrupt_window", 1),
        "(2 more other reasons)": ("other", 10),
    }
    assert profile.folded["reasons"].rows == 4 and profile.folded["reasons"].count == 16
    assert len(profile.reasons) == MAX_ROWS + 3
    again = from_json(json.loads(json.dumps(profile.to_json())))
    assert again == profile


def test_ports_beyond_the_kept_ones_are_counted_as_left_out() -> None:
    text = "IO Port Access Samples Samples% Time% Min Time Max Time Avg time\n"
    text += "".join(row(f"0x{port:x}:PIN", port + 1) for port in range(2 * MAX_ROWS))
    profile = parse_report(text, "x", 1.0)
    assert [p.port for p in profile.pio[:2]] == [2 * MAX_ROWS - 1, 2 * MAX_ROWS - 2]
    assert len(profile.pio) == MAX_ROWS and profile.folded["pio"].rows == MAX_ROWS
    assert profile.folded["pio"].count == sum(range(1, MAX_ROWS + 1))
    assert any(
        n.startswith(f"{2 * MAX_ROWS} I/O ports: the {MAX_ROWS} most") for n in profile.notes
    )


def test_a_file_read_in_small_chunks_reads_as_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines cut across chunks, CRLF and lone CR endings, and a last line with no end."""
    crlf = row("IO_INSTRUCTION", 7).replace("\n", "\r\n")
    text = (
        HEAD
        + row("HLT", 5)
        + row("MSR_READ", -4)
        + "\r\n"
        + HEAD.replace("\n", "\r")
        + crlf
        + row("CPUID", 2).rstrip()
    )
    path = tmp_path / "r.txt"
    path.write_bytes(text.encode())
    whole = parse_report(text, "x", 1.0)
    assert [(r.reason, r.count) for r in whole.reasons] == [("IO_INSTRUCTION", 7), ("CPUID", 2)]
    assert whole.skipped is not None and whole.skipped.line == 3
    for chunk in (1, 3, 7, 64):
        monkeypatch.setattr(perfkvm, "_CHUNK", chunk)
        note = f"imported from {path}; window 1 s as given (--seconds)"
        assert import_file(path, "x", 1.0).to_json() == whole.to_json() | {
            "notes": [*whole.notes, note]
        }


# -- 2. escape sequences in names ------------------------------------------------------------


def test_escape_sequences_in_names_never_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "evil.txt"
    report.write_text(HEAD + row(ESC, 5000) + row("IO_INSTRUCTION", 500) + row(ESC, -1))
    escaped = "\\x1b]0;pwned\\x07\\x1b[2JEVIL"
    for command in ("exits", "diagnose"):
        proc = kvmlab(capsys, command, "--import", str(report), "--seconds", "1")
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout
        assert escaped in proc.stdout  # the table row; diagnose: the rule naming the top reason
    data = json.loads(
        kvmlab(capsys, "exits", "--import", str(report), "--seconds", "1", "-o", "json").stdout
    )
    assert data["reasons"][0]["reason"] == escaped and data["skipped"]["name"] == escaped


# -- 3. impossible rows are said -------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (row("HLT", -5), "count -5 is negative"),
        (row("HLT", 2**63), f"count {2**63} is over 2**63-1"),
        (row("HLT", "9" * 5000), f"count {'9' * 23}… is over 2**63-1"),  # int() refuses
        (row("HLT", 3, "1.00us -2.00us 1.50us"), "time -2.00us is negative"),
        (row("HLT", 3, "1.00us 1e9us 1.50us"), None),  # not a number perf prints: not a row
        (row("HLT", 3, f"1.00us {'9' * 400}.0us 1.50us"), f"time {'9' * 23}…us is over 2**63 ns"),
        (row("HLT", 2**62, "1.00us 9999.00us 5000.00us"), "its table's exits or time add up past"),
        (row("0x10000:PIN", 3), "a port over 0xffff"),
        (row("0x1" + "0" * 16 + ":R", 3), "an address over 64 bits"),
        (row("X" * 70, 3), "a name of 70 characters (perf's have at most 40)"),
    ],
)
def test_impossible_rows_are_skipped_and_said(line: str, why: str | None) -> None:
    profile = parse_report(HEAD + row("CPUID", 10) + line + line, "x", 1.0)
    assert profile.total == 10
    if why is None:
        assert profile.skipped is None and not profile.notes
        return
    assert profile.skipped is not None
    assert (profile.skipped.rows, profile.skipped.line) == (2, 3)
    assert profile.skipped.why.startswith(why)
    assert profile.notes == [
        f"not counted: 2 rows perf does not print, the first on line 3 "
        f"('{profile.skipped.name}'): {profile.skipped.why}"
    ]
    assert len(profile.skipped.name) <= 40


def test_skipped_rows_are_in_the_text_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.txt"
    report.write_text(HEAD + row("HLT", 50) + row("IO_INSTRUCTION", -5) + row("PAUSE", 2**64))
    proc = kvmlab(capsys, "exits", "--import", str(report), "--seconds", "1")
    assert proc.returncode == 0 and proc.stderr == ""
    assert (
        "note: not counted: 2 rows perf does not print, the first on line 3 "
        "('IO_INSTRUCTION'): count -5 is negative\n"
    ) in proc.stdout
    data = json.loads(
        kvmlab(capsys, "exits", "--import", str(report), "--seconds", "1", "-o", "json").stdout
    )
    assert data["skipped"] == {
        "rows": 2,
        "line": 3,
        "name": "IO_INSTRUCTION",
        "why": "count -5 is negative",
    }
    assert data["total"] == 50 and data["folded"] == {}


def test_a_report_of_nothing_but_impossible_rows_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.txt"
    report.write_text(HEAD + row("HLT", -5))
    proc = kvmlab(capsys, "exits", "label", "--import", str(report), "--seconds", "1")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"kvmlab: {report}: no row to count, only 1 row perf does not "
        "print on line 2 ('HLT'): count -5 is negative; import the text "
        "perf printed, unedited\n"
    )


def test_no_table_names_the_file_not_the_label(tmp_path: Path) -> None:
    (tmp_path / "r.txt").write_text("hello\n")
    with pytest.raises(UsageError, match=f"^{re.escape(str(tmp_path))}/r.txt: no perf kvm stat"):
        import_file(tmp_path / "r.txt", "my-label", 1.0)


# -- 4. perf's refusals in kvmlab's words ----------------------------------------------------


@pytest.mark.parametrize(
    ("perf_says", "expected"),
    [
        (
            "incompatible file format (rerun with -v to learn more)\n"
            "Initializing perf session failed",
            ": starts like a perf.data file, but this host's perf cannot read it (cut short, "
            "damaged or from another perf version); import the text of 'perf kvm stat report' run "
            "where it was recorded",
        ),
        (
            "No trace sample to read. Did you call 'perf kvm record'?",
            ": a perf.data file without KVM exit events; record one with 'perf kvm stat record -p "
            "PID'",
        ),
        (
            "Segmentation fault (rerun with -v)\x1b[2J",
            ": perf cannot report it as a perf kvm stat recording (exit status 255); 'perf kvm -i ",
        ),
    ],
)
def test_perf_refusals_are_one_line_in_kvmlab_words(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    perf_says: str,
    expected: str,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    perf = bin_dir / "perf"
    perf.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stderr.write({perf_says!r})\nsys.exit(255)\n"
    )
    perf.chmod(0o755)
    data = tmp_path / "perf.data"
    data.write_bytes(b"PERFILE2" + bytes(200))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    proc = kvmlab(capsys, "exits", "--import", str(data), "--seconds", "1")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"kvmlab: {data}{expected}")
    assert proc.stderr.count("\n") == 1
    assert "rerun" not in proc.stderr and "\x1b" not in proc.stderr


def test_profile_without_the_new_fields_still_reads() -> None:
    """An inner kvmlab of before (no ``folded``, ``skipped``) answers in the same schema."""
    data = Profile(address="x", provider="p", provider_note="", seconds=1.0).to_json()
    del data["folded"], data["skipped"]
    assert from_json(data).folded == {} and from_json(data).skipped is None
