"""A run cut short: every report format shows what was measured, where it failed and why."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from dataclasses import replace

from rich.console import Console

from kvmlab.report.html import report_html
from kvmlab.report.jsonout import report_json
from kvmlab.report.markdown import markdown_table
from kvmlab.report.table import LevelTable, level_table
from kvmlab.report.text import print_table
from kvmlab.results.model import Failure, Summary
from tests.report import data

L2_BOOT = Failure(
    "default",
    "L2",
    "l1/l2",
    "boot",
    "nested/l1: starting its guests failed <inside> & so on",
    3,
    "  exit code: 3\n  | kvmlab: nested/l1/l2: the guest's init failed",
)
"""Starting L2 failed: nothing was measured there."""
L1_CPU = Failure("default", "L1", "l1", "disk", "Ctrl-C, SIGTERM or SIGHUP arrived", 130)
"""Ctrl-C during L1's disk workload: its cpu was measured."""


def below_l2() -> list[Summary]:
    return [s for s in data.summaries() if s.level != "L2"]


def text_of(table: LevelTable, title: str = "run 7") -> str:
    out = io.StringIO()
    print_table(table, Console(file=out, width=200, color_system=None), title)
    return out.getvalue()


def test_a_guest_that_failed_before_any_measurement_gets_an_empty_column() -> None:
    table = level_table(below_l2(), [L2_BOOT])
    assert [c.label for c in table.columns] == [
        "L0 host (native)",
        "L1 l1 (tcg)",
        "L2 l1/l2 (failed)",
    ]
    failed = table.columns[-1]
    assert all(failed not in row.cells for row in table.rows)
    assert table.failed(failed) == L2_BOOT and table.failed(table.columns[1]) is None
    assert table.notes == [
        "L2 l1/l2 failed while booting: nested/l1: starting its guests failed <inside> & so on"
    ]


def test_a_guest_cut_short_after_measuring_keeps_its_column_marked() -> None:
    table = level_table(below_l2(), [L1_CPU])
    l1 = table.columns[1]
    assert l1.accel == "tcg" and table.heading(l1) == "L1 l1 (tcg) interrupted"
    assert table.heading(table.columns[0]) == "L0 host (native)"
    teardown = replace(L1_CPU, stage="teardown", exit_code=3)
    assert level_table(below_l2(), [teardown]).heading(l1) == "L1 l1 (tcg)", (
        "a failed teardown does not put the measurements in doubt"
    )


def test_text_and_markdown_name_the_failure() -> None:
    table = level_table(below_l2(), [L2_BOOT])
    text = text_of(table)
    header = next(line for line in text.splitlines() if line.startswith("workload"))
    assert header.rstrip().endswith("L2 l1/l2 (failed)")
    assert text.splitlines()[-1] == table.notes[0]
    md = markdown_table(table, "run 7")
    assert "| L2 l1/l2 (failed) |" in md
    assert md.rstrip().splitlines()[-1] == (
        r"- L2 l1/l2 failed while booting: nested/l1: starting its guests failed \<inside\> "
        "& so on"
    )


def test_json_lists_the_failures_of_each_run() -> None:
    run = replace(data.run(complete=False), failures=[L2_BOOT])
    doc = json.loads(report_json([run], [(7, level_table(below_l2(), [L2_BOOT]))]))
    assert doc["runs"][0]["failures"] == [
        {
            "variant": "default",
            "level": "L2",
            "guest": "l1/l2",
            "stage": "boot",
            "message": L2_BOOT.message,
            "exit_code": 3,
            "detail": L2_BOOT.detail,
        }
    ]
    assert {r["level"] for r in doc["rows"]} == {"L0", "L1"}, "no rows for the empty column"


def test_html_names_the_failure_escaped_and_marks_the_column() -> None:
    run = replace(data.run(complete=False), failures=[L2_BOOT])
    page = report_html([run], [(7, level_table(below_l2(), [L2_BOOT]))], title="run 7")
    root = ET.fromstring(page)
    card = next(s for s in root.iter("section") if "failure" in s.get("class", ""))
    text = "".join(card.itertext())
    assert "L2 l1/l2 failed while booting: nested/l1: starting its guests failed <inside>" in text
    assert "| kvmlab: nested/l1/l2: the guest's init failed" in text, "the detail lines"
    assert "<inside>" not in page and "&lt;inside&gt; &amp; so on" in page
    heads = {th.text: th.get("class", "") for th in root.iter("th")}
    assert heads["L2 l1/l2 (failed)"] == "num failed" and heads["L1 l1 (tcg)"] == "num"
    facts = [dd.text for dd in root.iter("dd")]
    assert L2_BOOT.headline in facts, "the run's card names it too"


def test_html_boot_stages_as_runs_store_them() -> None:
    """Stored boot metrics end in ``_s``: the total is marked, not stacked as a stage."""
    stored = [replace(s, metric=f"{s.metric}_s") for s in data.boot()]
    page = report_html([data.run()], [(7, level_table(stored))], title="run 7")
    [figure] = ET.fromstring(page).iter("figure")
    found = figure.find("figcaption")
    assert found is not None
    caption = "".join(found.itertext())
    assert "stacked in order (qemu, kernel, init, agent)" in caption
