"""The comparison of strategies: summaries over verified runs only, the HTML page, the rule
that decides when the lab must come up again. Data: a real run of labs/migrate.toml's
qemu10 variant (QEMU 10.0.2, TCG, 2 vCPUs, 60 MiB/s over 128 MiB), two strategies, two
runs each, every other sample kept."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from kvmlab.migrate.compare import Strategy, intact, table
from kvmlab.migrate.guestside import Check
from kvmlab.migrate.result import Outcome
from kvmlab.migrate.stats import parse
from kvmlab.report.migration_html import line_chart, migration_html
from kvmlab.spec.migration import MigrationSpec

DATA = Path(__file__).parent / "data" / "compare-qemu10.json"


def outcome(verified: bool, downtime: float) -> Outcome:
    final = parse(
        {
            "status": "completed",
            "downtime": downtime,
            "total-time": 2000,
            "ram": {"transferred": 300 * 1048576, "dirty-sync-count": 5},
        },
        2.0,
    )
    return Outcome(
        "m/vm",
        "precopy",
        status="completed",
        samples=[final],
        guest_downtime_ms=downtime * 2,
        checks_after=[Check("memory pattern", verified, "")],
    )


def test_summary_counts_verified_runs_only() -> None:
    s = Strategy(
        MigrationSpec(name="a", guest="vm"),
        [outcome(True, 30), outcome(True, 50), outcome(False, 5)],
    )
    assert s.verified == 2
    assert s.summary("QEMU downtime") == (40.0, 30.0, 50.0, 2)
    assert s.summary("guest downtime") == (80.0, 60.0, 100.0, 2)
    header, rows = table([s])
    assert header[:3] == ["strategy", "verified", "total time (ms)"]
    assert rows[0][:4] == ["a (precopy)", "2/3", "2000 (2000-2000)", "40 (30-50)"]


def test_nothing_verified_shows_a_dash() -> None:
    _, rows = table([Strategy(MigrationSpec(name="b", guest="vm"), [outcome(False, 1)])])
    assert rows[0][1] == "0/1" and set(rows[0][2:]) == {"-"}


def test_intact_decides_when_the_lab_comes_up_again() -> None:
    assert intact(outcome(True, 1))
    assert not intact(outcome(False, 1))  # completed, guest broken
    ok_source = Outcome(
        "m/vm", "precopy", status="cancelled", source_checks=[Check("memory pattern", True, "")]
    )
    assert intact(ok_source)
    assert not intact(Outcome("m/vm", "precopy", status="failed", lost=True))
    assert not intact(Outcome("m/vm", "precopy", status="failed"))  # source never checked


def test_html_page_from_a_real_comparison() -> None:
    doc = json.loads(DATA.read_text())
    page = migration_html(doc, "migrate")
    assert page.startswith("<!DOCTYPE html>") and "qemu-default (precopy): 2/2 verified" in page
    svgs = [part.split("</svg>")[0] + "</svg>" for part in page.split("<svg")[1:]]
    assert len(svgs) == 3  # bars, RAM remaining, throughput
    for svg in svgs:
        ET.fromstring("<svg" + svg)  # well-formed
    assert "RAM remaining over time (MiB)" in page and "<polyline" in page


def test_line_chart_escapes_names_and_survives_empty_series() -> None:
    svg = line_chart(
        [("<x&y>", "#000", [(0.0, 1.0), (2.0, 0.5)]), ("none", "#111", [])], "t", "MiB", "f"
    )
    root = ET.fromstring(svg)
    assert any(el.text == "<x&y>" for el in root.iter())
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 1
