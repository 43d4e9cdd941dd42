"""Reports stay linear in what a run holds: ``report -o html`` of a run of
200,000 samples took over a minute, ``results show`` 26 s, from work quadratic in the rows,
the columns, the variants or the failures of the level table. Each shape is rendered at two
sizes eight times apart: linear work takes about eight times as long, quadratic sixty-four;
and the bounds beyond which a report refuses, or leaves its charts out, say so."""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kvmlab.cli.main import app
from kvmlab.report import html as html_module
from kvmlab.report import table as table_module
from kvmlab.report.configurations import configurations
from kvmlab.report.grid import Col, fit_widths, print_grid
from kvmlab.report.html import report_html
from kvmlab.report.markdown import markdown_table
from kvmlab.report.table import level_table
from kvmlab.report.text import print_table
from kvmlab.results.model import Failure, Run, Sample, Summary
from kvmlab.results.stats import summarize
from kvmlab.results.store import ResultStore

SMALL, BIG = 250, 2000
LINEAR = 24.0
"""The most the big size may cost over the small one (8x the work; quadratic is 64x)."""


def summary(variant: str, guest: str, level: str, metric: str, value: float) -> Summary:
    low, high = value * 0.9, value * 1.1
    return Summary(
        variant, guest, level, "tcg", "cpu", metric, "ops/s", True, 3, value, low, high, 1.0, "cmd"
    )


def many_rows(n: int) -> tuple[list[Summary], list[Failure]]:
    """n metrics at L0 and L1."""
    out = []
    for i in range(n):
        out.append(summary("default", "host", "L0", f"m{i}", 100.0 + i))
        out.append(summary("default", "vm", "L1", f"m{i}", 90.0 + i))
    return out, []


def many_columns(n: int) -> tuple[list[Summary], list[Failure]]:
    """n guests at L1 (and the host), each with one metric, and a failure at each."""
    out = [summary("default", "host", "L0", "m", 100.0)]
    failures = []
    for i in range(n):
        out.append(summary("default", f"g{i}", "L1", "m", 90.0))
        failures.append(Failure("default", "L1", f"g{i}", "cpu", "boom", 3))
    return out, failures


def many_variants(n: int) -> tuple[list[Summary], list[Failure]]:
    """n variants of a host and a guest, two metrics each."""
    out = []
    for i in range(n):
        for metric in ("a", "b"):
            out.append(summary(f"v{i}", "host", "L0", metric, 100.0))
            out.append(summary(f"v{i}", "vm", "L1", metric, 80.0))
    return out, []


def render_all(
    shape: Callable[[int], tuple[list[Summary], list[Failure]]], n: int, text: bool = True
) -> None:
    summaries, failures = shape(n)
    table = level_table(summaries, failures)
    report_html([Run(1, "lab", "/x", "d", "quick", "0", 1.7e9)], [(1, table)])
    markdown_table(table, "title")
    if text:  # rich's own work is linear but heavy: it would hide a quadratic part
        print_table(table, Console(file=io.StringIO(), width=120), "title")
    host = {f"kvm under lab/vm ({v})": "kvm_intel" for v in table.variants}
    configs = configurations(table, host)
    assert configs is None or len(configs.rows) == len(table.variants)


def cost(work: Callable[[], object]) -> float:
    """CPU seconds of ``work``, the least of two tries (other processes do not count)."""
    best = float("inf")
    for _ in range(2):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return max(best, 1e-3)


@pytest.mark.parametrize(
    ("shape", "small", "big", "charts"),
    [
        (many_rows, 1000, 8000, False),  # the tables alone (16,000 values draw no charts)
        (many_columns, 250, 2000, True),
        (many_variants, 125, 1000, True),
    ],
    ids=["rows", "columns", "variants"],
)
def test_reports_grow_linearly_with_the_table(
    shape: Callable[[int], tuple[list[Summary], list[Failure]]],
    small: int,
    big: int,
    charts: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not charts:
        monkeypatch.setattr(html_module, "MAX_BARS", 0)
    low = cost(lambda: render_all(shape, small, text=charts))
    high = cost(lambda: render_all(shape, big, text=charts))
    assert high / low < LINEAR, f"{shape.__name__}: {low:.3f} s -> {high:.3f} s"


def test_reading_and_summarising_samples_is_linear(tmp_path: Path) -> None:
    def measure(n: int) -> float:
        db = tmp_path / f"{n}.sqlite"
        with ResultStore(db) as store:
            run = store.start(Run(0, "lab", "/x", "d", "quick", "0", 1.7e9))
            store.add(
                run,
                [
                    Sample(
                        "default",
                        "host",
                        "L0",
                        "native",
                        "cpu",
                        f"m{i % 50}",
                        float(i),
                        "u",
                        True,
                        i,
                        "c",
                    )
                    for i in range(n)
                ],
            )
        with ResultStore.reading(db) as store:
            return cost(lambda: summarize(store.samples(1)))

    small, big = measure(SMALL * 10), measure(BIG * 10)
    assert big / small < LINEAR, f"{small:.3f} s -> {big:.3f} s"


def test_plain_tables_and_their_widths_are_linear_in_the_columns() -> None:
    def grid(n: int) -> None:
        columns = [Col(f"c{i}") for i in range(n)]
        print_grid(Console(file=io.StringIO()), columns, [[str(i) for i in range(n)]] * 3)
        assert sum(fit_widths([1] * n, [3] * n, n + n // 2)) == n + n // 2

    small, big = cost(lambda: grid(SMALL * 4)), cost(lambda: grid(BIG * 4))
    assert big / small < LINEAR, f"{small:.3f} s -> {big:.3f} s"


def reference_fit(least: list[int], most: list[int], room: int) -> list[int]:
    """fit_widths as it was: the widest (first of equals) loses a character at a time."""
    widths = list(most)
    while sum(widths) > room:
        shrinkable = [i for i, w in enumerate(widths) if w > least[i]]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def test_fit_widths_computed_at_once_gives_way_as_before() -> None:
    rng = random.Random(39)
    for _ in range(3000):
        n = rng.randint(1, 7)
        least = [rng.randint(0, 9) for _ in range(n)]
        most = [max(lo, rng.randint(0, 20)) for lo in least]
        room = rng.randint(0, 80)
        assert fit_widths(least, most, room) == reference_fit(least, most, room)


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run 1: four metrics at L0, L1 and L2, three repetitions each."""
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("KVMLAB_RESULTS", str(db))
    with ResultStore.writing() as store:
        run = store.start(Run(0, "lab", "/x", "d", "quick", "0", 1.7e9))
        store.add(
            run,
            [
                Sample("default", guest, level, "tcg", "cpu", f"m{m}", 10.0 + r, "u", True, r, "c")
                for guest, level in (("host", "L0"), ("l1", "L1"), ("l1/l2", "L2"))
                for m in range(4)
                for r in range(3)
            ],
        )
        store.finish(run)
    yield db


def invoke(*args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "120"})
    return result.exit_code, result.stdout, result.exception


def test_a_table_beyond_the_bound_is_refused_naming_what_gives_every_value(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_module, "MAX_CELLS", 11)  # the run has 4 rows x 3 columns
    for output in ("text", "md", "html"):
        _, _, error = invoke("report", "1", "-o", output)
        assert isinstance(error, table_module.TableTooLarge), output
        assert str(error) == (
            "run 1: its level table would have 4 rows x 3 columns, more than the 11 cells a "
            "report shows; 'kvmlab report 1 -o json' or 'kvmlab results export 1' give every "
            "value"
        )
    code, out, error = invoke("report", "1", "-o", "json")
    assert (code, error) == (0, None) and '"rows"' in out


def test_a_page_beyond_the_chart_bound_says_it_left_the_charts_out(
    results: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    page = tmp_path / "r.html"
    code, _, error = invoke("report", "1", "-o", "html", "--out", str(page))
    assert (code, error) == (0, None)
    assert "<svg" in page.read_text() and "No charts" not in page.read_text()
    monkeypatch.setattr(html_module, "MAX_BARS", 11)
    code, _, error = invoke("report", "1", "-o", "html", "--out", str(page))
    assert (code, error) == (0, None)
    text = page.read_text()
    assert "<svg" not in text
    assert (
        "No charts: the tables hold 12 values, more than the 11 the charts of one page draw."
        in text
    )
    assert text.count("<td") > 12, "the table has every value"
