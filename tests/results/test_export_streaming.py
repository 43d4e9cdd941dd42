"""``results export`` streams: a page of sample rows is read and written at a time, so a
run of millions never sits whole in memory (2M samples took 6 GB as one JSON document),
while the output stays byte for byte what ``json.dumps(doc, indent=2)`` and the CSV
writer make of the whole run; ``--out`` is still written atomically (a temporary file
renamed at the end, removed when the export stops half-way)."""

from __future__ import annotations

import csv
import io
import json
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from kvmlab.cli.bench_cmds import csv_cell, results_export
from kvmlab.jsondoc import envelope
from kvmlab.results import store as store_module
from kvmlab.results.model import Run, Sample
from kvmlab.results.store import ResultStore

ODD = ("plain", "é ü 日本", 'quote " and \\ backslash', "\x1b[31mred\x1b[0m", "=1+2", "🙂\n")


def make(path: Path, count: int) -> Path:
    with ResultStore.writing(path) as store:
        run = store.start(Run(0, "lab", "/labs/lab.toml", "d", "quick", "0", time.time()))
        store.add(
            run,
            [
                Sample(
                    "default",
                    ("host", "l1", "l1/l2")[i % 3],
                    ("L0", "L1", "L2")[i % 3],
                    "tcg",
                    "cpu",
                    ODD[i % len(ODD)],
                    i * 0.5 - 7.25,
                    "events/s",
                    i % 2 == 0,
                    i,
                    f"sysbench {ODD[(i + 1) % len(ODD)]}",
                )
                for i in range(count)
            ],
        )
        store.finish(run)
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("KVMLAB_RESULTS", str(db))
    return db


def whole(db: Path, fmt: str) -> str:
    """The export as the whole document was made before it streamed."""
    with ResultStore.reading(db) as store:
        run = store.run("1")
        samples = store.samples(run.id)
    if fmt == "json":
        doc = {"run": asdict(run), "samples": [vars(s) for s in samples], "not_finite": 0}
        return json.dumps(envelope("samples", doc), indent=2) + "\n"
    buf = io.StringIO()
    writer = csv.writer(buf)
    names = [f.name for f in fields(Sample)]
    writer.writerow(["run", *names])
    for s in samples:
        writer.writerow([run.id, *(csv_cell(getattr(s, n)) for n in names)])
    return buf.getvalue()


@pytest.mark.parametrize("count", [0, 1, 7, store_module.PAGE * 2 + 3])
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_stream_is_the_whole_document(
    fmt: str, count: int, env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make(env, count)
    out = tmp_path / f"out.{fmt}"
    results_export("1", fmt, out)
    assert out.read_bytes() == whole(env, fmt).encode()
    results_export("1", fmt, None)
    assert capsys.readouterr().out == whole(env, fmt)


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_memory_does_not_grow_with_the_run(fmt: str, env: Path, tmp_path: Path) -> None:
    """40,000 samples: read whole, they and the document peak at 53 MB (CSV) and 117 MB
    (JSON); streamed, at about 7 MB (a page of rows, whatever the run holds)."""
    make(env, 40_000)
    tracemalloc.start()
    try:
        results_export("1", fmt, tmp_path / "out")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / "out").stat().st_size > 40_000 * 50
    assert peak < 15_000_000, f"{peak / 1e6:.1f} MB at the peak"


def test_an_export_stopped_half_way_leaves_the_file_as_it_was(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(env, store_module.PAGE + 10)
    out = tmp_path / "out.json"
    out.write_text("the export before\n")
    real = ResultStore.iter_samples

    def interrupted(self: ResultStore, run_id: int) -> Iterator[Sample]:
        for i, sample in enumerate(real(self, run_id)):
            if i == store_module.PAGE:
                raise KeyboardInterrupt  # Ctrl-C while the second page is read
            yield sample

    monkeypatch.setattr(ResultStore, "iter_samples", interrupted)
    with pytest.raises(KeyboardInterrupt):
        results_export("1", "json", out)
    assert out.read_text() == "the export before\n"
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("r.sqlite"))
    assert left == ["out.json"], "no temporary file left behind"


def test_rows_are_read_a_page_at_a_time(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(env, 25)
    monkeypatch.setattr(store_module, "PAGE", 10)
    with ResultStore.reading() as store:
        pages: list[int] = []
        rows = store._rows

        def counted(sql: str, params: tuple[object, ...] = ()) -> list[object]:
            got = rows(sql, params)
            if "FROM samples" in sql:
                pages.append(len(got))
            return got

        monkeypatch.setattr(store, "_rows", counted)
        assert [s.repetition for s in store.iter_samples(1)] == list(range(25))
    assert pages == [10, 10, 5]
