"""Output for pipes and scripts: whole values, no trailing spaces, ``-o json`` everywhere.

Commands run in-process (typer's runner: stdout is not a terminal) with ``COLUMNS=60``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvmlab.cli.main import app
from kvmlab.errors import SpecError, UsageError
from kvmlab.host.accel import choose_accel
from kvmlab.host.doctor import run_checks
from kvmlab.host.output import findings_to_dict
from kvmlab.results.model import Run, Sample
from kvmlab.results.store import ResultStore
from tests.conftest import LABS, ROOT
from tests.fakeguest import running_guest

INTEL = ROOT / "tests" / "host" / "fixtures" / "intel-nested-off"
METRIC = "randread_bandwidth_mib_s"
LONG_LAB = "a-lab-with-a-rather-long-name"


def invoke(*args: str) -> tuple[str, str, BaseException | None]:
    """stdout, stderr and the exception (kvmlab errors reach the caller in-process)."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "60"})
    error = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.stdout, result.stderr, error


def assert_pipe_friendly(text: str) -> None:
    assert text.strip()
    assert "…" not in text, "nothing is shortened"
    assert not [line for line in text.splitlines() if line != line.rstrip()], "trailing spaces"
    assert not any(c in text for c in "┏━┃│┡╇└"), "no box characters in a pipe"


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two complete runs (ids 1 and 2) of a three-level lab in KVMLAB_RESULTS."""
    db = tmp_path / "results.sqlite"
    monkeypatch.setenv("KVMLAB_RESULTS", str(db))
    places = (("host", "L0", "native"), ("l1", "L1", "tcg"), ("l1/l2", "L2", "tcg"))
    with ResultStore() as store:
        for base in (100.0, 200.0):
            run = store.start(
                Run(0, LONG_LAB, "/labs/x.toml", "ab" * 32, "quick", "0.1.0", time.time() - 100)
            )
            store.add(
                run,
                [
                    Sample(
                        "default",
                        guest,
                        level,
                        accel,
                        "disk",
                        METRIC,
                        base + rep,
                        "MiB/s",
                        True,
                        rep,
                        "fio --filename=/var/tmp/kvmlab-fio-x/f",
                    )
                    for guest, level, accel in places
                    for rep in range(3)
                ],
            )
            store.finish(run)
    yield db


def test_results_ls_prints_whole_values(results: Path) -> None:
    out, _, error = invoke("results", "ls")
    assert error is None
    assert_pipe_friendly(out)
    assert out.splitlines()[0] == f"runs in {results}"
    row = out.splitlines()[2].split()
    assert row[:3] == ["2", LONG_LAB, "quick"]
    assert len(row[3]) == len("2026-01-02") and len(row[4]) == len("21:46")
    assert row[-2:] == ["complete", "9"]


def test_results_ls_json_counts_samples(results: Path) -> None:
    out, _, _ = invoke("results", "ls", "-o", "json")
    assert [(r["id"], r["samples"], r["complete"]) for r in json.loads(out)["runs"]] == [
        (2, 9, True),
        (1, 9, True),
    ]


def test_report_prints_whole_values(results: Path) -> None:
    for args in (["report"], ["report", "last"], ["report", "2"]):
        out, _, error = invoke(*args)
        assert error is None
        assert_pipe_friendly(out)
        assert re.search(rf"disk\s+{METRIC}\s+MiB/s ↑\s+201 ±0%\s+201 ±0% \+0.0%", out)
        assert re.search(r"L0 host \(native\)\s+L1 l1 \(tcg\)\s+L2 l1/l2 \(tcg\)", out)


@pytest.mark.parametrize("command", [["report", "2"], ["report", "-o", "json", "2"]])
def test_report_json_is_alone_on_stdout(results: Path, command: list[str]) -> None:
    out, _, _ = invoke(*command, "-o", "json")
    doc = json.loads(out)
    assert doc["schema"] == "kvmlab.report/1" and [r["id"] for r in doc["runs"]] == [2]


def test_compare_labels_each_runs_columns_with_its_id(results: Path) -> None:
    out, _, _ = invoke("report", "2", "--compare", "1")
    assert_pipe_friendly(out)
    header = out.splitlines()[1]
    for run in ("2", "1"):
        for label in ("L0 host (native)", "L1 l1 (tcg)", "L2 l1/l2 (tcg)"):
            assert f"run {run} {label}" in header
    md, _, _ = invoke("report", "2", "--compare", "1", "-o", "md")
    assert "| run 2 L0 host (native) |" in md and "| run 1 L0 host (native) |" in md


def test_compare_json_rows_carry_their_own_run(results: Path) -> None:
    out, _, _ = invoke("report", "2", "--compare", "1", "-o", "json")
    rows = json.loads(out)["rows"]
    values = {(r["run"], r["level"]): r["value"] for r in rows}
    assert values[(2, "L0")] == 201.0 and values[(1, "L0")] == 101.0
    assert {r["variant"] for r in rows} == {"default"}


def test_compare_with_itself_is_refused(results: Path) -> None:
    _, _, error = invoke("report", "last", "--compare", "2")
    assert isinstance(error, UsageError) and "is run 2 itself" in str(error)


def test_check_explain_prints_each_key_on_one_whole_line() -> None:
    from kvmlab.spec.reference import lab_reference

    out, _, _ = invoke("check", "--explain")
    assert_pipe_friendly(out)
    lines = out.splitlines()
    for doc in lab_reference():
        assert any(x.startswith(f"{doc.key} ") and x.endswith(f"  {doc.meaning}") for x in lines), (
            doc.key
        )
    assert "[tap | vhost-net] `tap`" in out, "meanings are not read as markup"


def test_check_explain_json_and_markdown() -> None:
    out, _, _ = invoke("check", "--explain", "-o", "json")
    doc = json.loads(out)
    assert doc["schema"] == "kvmlab.keys/1"
    assert {"key": "name", "type": "str", "default": "required"}.items() <= doc["keys"][0].items()
    md, _, _ = invoke("check", "--explain", "-o", "md")
    assert md == (ROOT / "docs" / "lab-reference.md").read_text()


def test_check_json_lists_labs_with_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[guests.vm]\nvcpu = 2\n')
    out, _, error = invoke("check", str(LABS / "nested.toml"), str(bad), "-o", "json")
    assert isinstance(error, SpecError), "exit 2 as without -o json"
    doc = json.loads(out)
    assert doc["schema"] == "kvmlab.check/1" and doc["ok"] is False
    good, wrong = doc["labs"]
    assert good["ok"] and good["lab"] == "nested" and good["problems"] == []
    assert [g["address"] for g in good["guests"]] == ["l1", "l1/l2"]
    assert good["guests"][0]["hypervisor"] is True
    assert wrong["problems"] == [
        {
            "file": str(bad),
            "path": "guests.vm.vcpu",
            "message": "unknown key; did you mean 'vcpus'?",
        }
    ]


def test_doctor_in_a_pipe_keeps_every_fix_and_path_on_one_line() -> None:
    out, _, _ = invoke("doctor", "--root", str(INTEL))
    assert_pipe_friendly(out)
    lines = [line.strip() for line in out.splitlines()]
    doc = findings_to_dict(run_checks(INTEL), choose_accel(INTEL))
    fixes = [fix for f in doc["findings"] for fix in f["fix"]]
    assert max(map(len, fixes)) > 60
    for fix in fixes:
        assert f"fix: {fix}" in lines
    for f in doc["findings"]:
        for e in f["evidence"]:
            assert f"{e['source']}: {e['value']}".strip() in lines


def test_ps_in_a_pipe_prints_whole_addresses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kvmlab.runtime.cpu_compare as usage

    monkeypatch.setattr(usage, "guest_cpu_ticks", lambda *_: None)  # no agent to ask
    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    with running_guest(LONG_LAB, ("vm1",)), running_guest("b3", ("v2",)):
        out, _, error = invoke("ps")
        doc, _, _ = invoke("ps", "-o", "json")
    assert error is None
    assert_pipe_friendly(out)
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [r[0] for r in rows] == [f"{LONG_LAB}/vm1", "b3/v2"]
    assert all(r[3] == "running" for r in rows)
    assert {g["address"] for g in json.loads(doc)["guests"]} == {"b3/v2", f"{LONG_LAB}/vm1"}


def test_bench_json_is_alone_on_stdout_and_hints_are_whole_lines(
    results: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``bench -o json`` with the measuring replaced: it stores nothing new, reports run 2."""
    import kvmlab.bench.session as session

    monkeypatch.setenv("KVMLAB_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(session, "run_bench", lambda *args, **kw: 2)
    out, err, error = invoke("bench", str(LABS / "basic.toml"), "--levels", "L0", "-o", "json")
    assert error is None, err
    assert json.loads(out)["runs"][0]["id"] == 2
    hint = f"run 2 stored in {results}; 'kvmlab report 2 -o html --out report.html' writes the page"
    assert hint in err.splitlines()
    text, _, _ = invoke("bench", str(LABS / "basic.toml"), "--levels", "L0")
    assert_pipe_friendly(text)
    assert METRIC in text
