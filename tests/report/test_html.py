"""The HTML report: content, escaping, charts; and one render in headless Chromium."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvmlab.report import svg
from kvmlab.report.html import report_html
from kvmlab.report.table import level_table
from tests.report import data, png

SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM = Path("/usr/bin/chromium")


def render(variants: int = 1, with_boot: bool = True) -> str:
    table = data.one_variant() if variants == 1 else data.two_variants()
    names = ("default", "tuned")[:variants]
    boot = data.boot(names) if with_boot else None
    return report_html([data.run()], [(7, table)], boot=boot, title=data.TITLE)


def parse(page: str) -> ET.Element:
    """The whole page is well-formed XML (HTML elements unqualified, SVG in its namespace)."""
    return ET.fromstring(page)


def text(el: ET.Element | None) -> str:
    """The text of an element that must be there."""
    assert el is not None
    return "".join(el.itertext())


def figures(root: ET.Element) -> dict[str, ET.Element]:
    """Figures by their heading."""
    return {text(f.find("h3")): f for f in root.iter("figure")}


def classed(el: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in el.iter(SVG + tag) if cls in e.get("class", "").split()]


def test_page_is_well_formed_and_self_contained() -> None:
    page = render()
    root = parse(page)
    assert page.startswith("<!DOCTYPE html>")
    assert root.tag == "html" and root.get("lang") == "en"
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert not re.search(r"\b(src|href)=", page)
    assert set(re.findall(r"https?://[^\"' ]*", page)) == {"http://www.w3.org/2000/svg"}
    assert "@import" not in page and "url(" not in page


def test_title_is_escaped() -> None:
    page = render()
    assert "<title>nested &lt;lab&gt; &amp; &quot;fio&quot;</title>" in page
    assert data.TITLE not in page
    root = parse(page)
    assert text(root.find("head/title")) == data.TITLE
    assert text(next(root.iter("h1"))) == data.TITLE


def test_user_text_is_escaped_everywhere() -> None:
    page = render(variants=2)
    for raw in (data.COMMAND, "<rand>", "nested<&>", "TCG <& "):
        assert raw not in page
    assert "--name=&lt;rand&gt; --filename=/tmp/a&amp;b &quot;x&quot;" in page
    root = parse(page)
    hovers = [td.get("title", "") for td in root.iter("td")]
    assert any(h.endswith(data.COMMAND) for h in hovers)
    tooltips = [text(t) for t in root.iter(SVG + "title")]
    assert any(t.endswith(data.COMMAND) for t in tooltips)


def test_header_names_run_and_host_facts() -> None:
    root = parse(render())
    card = root.find(".//section[@id='run-7-facts']")
    assert card is not None
    facts = dict(
        zip((text(d) for d in card.iter("dt")), (text(d) for d in card.iter("dd")), strict=True)
    )
    assert facts["lab"] == "nested<&>" and facts["suite"] == "seed-000"
    assert facts["started"] == "2024-05-29 16:26:40 UTC" and facts["kvmlab"] == "0.1.0"
    host = [text(d) for d in card.iter("dt")][-9:]
    assert host == [
        "cpu",
        "CPUs",
        "memory (GiB)",
        "kernel",
        "KVM flavour",
        "qemu",
        "accelerator",
        "accelerator reason",
        "extra",
    ]
    assert facts["accelerator reason"] == 'kvm_pvm is loaded: guests run under TCG <& "x">'
    assert facts["CPUs"] == "2" and facts["extra"] == "nested: yes"
    assert "complete" in text(card.find("div/h3"))


def test_incomplete_run_is_marked() -> None:
    page = report_html([data.run(complete=False)], [(7, data.one_variant())])
    assert 'class="badge incomplete">incomplete<' in page


def test_level_table_has_values_units_and_coloured_changes() -> None:
    root = parse(render())
    table = next(root.iter("table"))
    heads = [text(th) for th in table.iter("th")]
    assert heads == [
        "workload",
        "metric",
        "unit",
        "L0 host (native)",
        "L1 l1 (tcg)",
        "L2 l1/l2 (kvm)",
    ]
    rows = [[text(td) for td in tr.iter("td")] for tr in table.iter("tr")][1:]
    assert rows[0] == [
        "cpu",
        "events",
        "events/s ↑",
        "1210 ±4%",
        "152 ±4%-87.4% [-88.0,-86.8] worse",
        "96.5 ±4%-36.5% [-39.4,-33.5] worse",
    ]
    assert rows[1] == [
        "latency",
        "ms ↓",
        "0.83 ±4%",
        "6.60 ±4%+695.2% [+659,+733] worse",
        "10.4 ±4%+57.6% [+50,+65] worse",
    ]
    assert rows[2][:3] == ["disk", "randread", "IOPS ↑"]
    spans = {text(s): s.get("class") for s in table.iter("span") if s.get("class")}
    assert spans["-87.4% [-88.0,-86.8] worse"] == "change loss"  # less throughput
    assert spans["+695.2% [+659,+733] worse"] == "change loss"  # more latency


def test_two_variants_group_columns_and_show_gains() -> None:
    root = parse(render(variants=2))
    table = next(root.iter("table"))
    variants = [
        (text(th), th.get("colspan")) for th in table.iter("th") if th.get("scope") == "colgroup"
    ]
    assert variants == [("default", "3"), ("tuned", "3")]
    spans = {text(s): s.get("class") for s in table.iter("span") if s.get("class")}
    small = next(k for k in spans if k.startswith("+6.3%"))  # tuned L1 randwrite: within
    assert spans[small] == "change" and small.endswith(" noise")  # disk's noise: no colour
    faster = parse(report_html([data.run()], [(7, data.two_variants(scale=2.0))]))
    spans = {text(s): s.get("class") for s in faster.iter("span") if s.get("class")}
    gain = next(k for k in spans if k.startswith("+46.7%"))  # past disk's 40 %: a gain
    assert spans[gain] == "change gain" and gain.endswith(" better")
    legend = [text(g) for g in classed(figures(root)["cpu"], "g", "legend")]
    assert legend[3:] == [
        "tuned · L0 host (native)",
        "tuned · L1 l1 (tcg)",
        "tuned · L2 l1/l2 (kvm)",
    ]
    cpu = figures(root)["cpu"]
    assert len(classed(cpu, "rect", "bar")) == 12
    assert [text(t) for t in classed(cpu, "text", "set-label")] == ["default", "tuned"] * 2


@pytest.mark.parametrize("variants", [1, 2])
def test_one_chart_per_workload_with_error_bars(variants: int) -> None:
    root = parse(render(variants))
    found = figures(root)
    assert list(found) == ["cpu", "disk", "boot stages per guest"]
    for name in ("cpu", "disk"):
        figure = found[name]
        charts = list(figure.iter(SVG + "svg"))
        assert len(charts) == 1
        assert charts[0].get("role") == "img"
        assert len(classed(figure, "rect", "bar")) == 2 * 3 * variants
        bars = classed(figure, "g", "errorbar")
        assert len(bars) == 2 * 3 * variants
        assert all(len(list(b.iter(SVG + "line"))) == 3 for b in bars)  # whisker and two caps
        caption = text(figure.find("figcaption"))
        assert "L0 host (native)" in caption and "L2 l1/l2 (kvm)" in caption
        assert "min to max" in caption
    axes = [text(t) for t in classed(found["disk"], "text", "axis-label")]
    assert axes == ["IOPS", "MB/s"]
    assert "randread in IOPS" in text(found["disk"].find("figcaption"))


def test_boot_stages_are_stacked_per_guest() -> None:
    figure = figures(parse(render(variants=2)))["boot stages per guest"]
    stacks = classed(figure, "g", "stack")
    assert [text(s.find(SVG + "text")) for s in stacks] == [
        "default · L1 l1 (tcg)",
        "default · L2 l1/l2 (kvm)",
        "tuned · L1 l1 (tcg)",
        "tuned · L2 l1/l2 (kvm)",
    ]
    assert all(len(classed(s, "rect", "bar")) == 4 for s in stacks)
    assert len(classed(figure, "line", "total")) == 4
    assert len(classed(figure, "g", "errorbar")) == 4
    assert [text(t) for t in classed(figure, "text", "axis-label")] == ["s (lower is better)"]
    assert "qemu, kernel, init, agent" in text(figure.find("figcaption"))


def test_boot_rows_of_the_table_become_the_stacked_chart() -> None:
    table = level_table(data.summaries() + data.boot())
    root = parse(report_html([data.run()], [(7, table)]))
    assert list(figures(root)) == ["cpu", "disk", "boot stages per guest"]
    assert "boot" in [text(td) for td in root.iter("td")]  # still in the table


def test_missing_cells_and_empty_reports() -> None:
    partial = level_table([s for s in data.summaries() if (s.level, s.metric) != ("L2", "latency")])
    root = parse(report_html([data.run()], [(7, partial)]))
    assert "–" in [text(td) for td in root.iter("td")]
    assert len(classed(figures(root)["cpu"], "rect", "bar")) == 5
    empty = report_html([], [])
    assert "No results to report." in text(parse(empty))


def test_output_is_deterministic() -> None:
    assert render(2) == render(2)


def test_ticks_and_labels() -> None:
    assert svg.ticks(0, 1306.8) == [0, 500, 1000, 1500]
    assert svg.ticks(0, 11.2) == [0, 2.5, 5, 7.5, 10, 12.5]
    assert svg.ticks(0, 0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert svg.ticks(-3, 9)[0] < -3 + 1e-9 and 0 in svg.ticks(-3, 9)
    assert [svg.tick_label(v) for v in (0, 2.5, 9000, 48000, 1.5e6)] == [
        "0",
        "2.5",
        "9000",
        "48k",
        "1.5M",
    ]


@pytest.mark.functional
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)
def test_chromium_renders_the_report(tmp_path: Path) -> None:
    page, shot, profile = tmp_path / "report.html", tmp_path / "report.png", tmp_path / "profile"
    page.write_text(render(variants=2))
    profile.mkdir()
    argv = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        page.as_uri(),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever Chromium left in its session
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == 0, output.decode(errors="replace")
    raw = shot.read_bytes()
    assert png.size(raw) == (1280, 2000)
    image = png.decode(raw)
    colours = {p[:3] for p in image.pixels()}
    assert len(colours) > 200, f"only {len(colours)} colours: blank page?"
    assert bytes.fromhex("f6f8fa") in colours  # page background
    for variant in (0, 1):  # the L0 bars of both variants were drawn
        assert bytes.fromhex(svg.series_color(variant, 0)[1:]) in colours
