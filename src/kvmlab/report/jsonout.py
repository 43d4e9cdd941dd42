"""The report as JSON, for other tools (docs/json-output.md).

Schema ``kvmlab.report/1``; with ``--compare`` each row names its own run and variant::

    {"schema": "kvmlab.report/1",
     "runs": [{"id", "lab", "suite", "spec_digest", "kvmlab_version", "started", "ended",
               "complete", "host": {...},
               "not_finite" (stored values left out: not finite numbers, e.g. inf),
               "failures": [{"variant", "level", "guest", "stage" ("boot", a workload,
                             "teardown"), "message" (the error's first line),
                             "exit_code" (3 a component failed, 130 interrupted),
                             "detail" (its other lines)}]}],
     "rows": [{"run", "variant", "guest", "level", "accelerator", "workload", "metric",
               "unit", "higher_is_better", "value" (median), "min", "max", "stdev", "n",
               "spread_pct" ((max-min)/median*100), "change_pct" (vs the level below, or null),
               "command"}],
     "migrations": [{"run", "variant", "comparison" (as ``kvmlab migrate LAB -o json``
                     prints it: every strategy, outcome, time series and check)}]}
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from kvmlab.jsondoc import envelope
from kvmlab.report.table import Cell, LevelTable
from kvmlab.results.model import Run
from kvmlab.results.verdict import outliers

SCHEMA = "kvmlab.report/1"


def report_json(
    runs: list[Run],
    tables: list[tuple[int, LevelTable]],
    migrations: Sequence[tuple[int, str, dict[str, Any]]] = (),
) -> str:
    """Runs, one row per (run, column, metric), and the runs' live migrations."""
    rows: list[dict[str, Any]] = []
    for run_id, table in tables:
        for row in table.rows:
            for col, cell in row.cells.items():
                s = cell.summary
                rows.append(
                    {
                        "run": run_id,
                        "variant": col.variant,
                        "guest": col.guest,
                        "level": col.level,
                        "accelerator": col.accel,
                        "workload": row.workload,
                        "metric": row.metric,
                        "unit": row.unit,
                        "higher_is_better": row.higher_is_better,
                        "value": _finite(s.median),
                        "min": _finite(s.minimum),
                        "max": _finite(s.maximum),
                        "stdev": _finite(s.stdev),
                        "n": s.n,
                        "spread_pct": _finite(round(s.spread_pct, 3)),
                        "change_pct": None
                        if cell.change_pct is None
                        else _finite(round(cell.change_pct, 3)),
                        **_verdict(cell),
                        "values": [_finite(v) for v in s.values],
                        "outliers": outliers(s.values),
                        "command": s.command,
                    }
                )
    moved = [
        {"run": run, "variant": variant, "comparison": doc} for run, variant, doc in migrations
    ]
    left_out = {run: n for _, table in tables for run, n in table.left_out.items()}
    described = [{**asdict(r), "not_finite": left_out.get(r.id, 0)} for r in runs]
    payload = {"runs": described, "rows": rows, "migrations": moved}
    doc = envelope("report", payload)
    return json.dumps(_json_safe(doc), indent=2, allow_nan=False)


def _verdict(cell: Cell) -> dict[str, Any]:
    """The change's interval (percent) and verdict, keys present on every row."""
    change = cell.change
    interval = change.interval_pct() if change is not None else None
    return {
        "change_low_pct": None if interval is None else _finite(round(interval[0], 3)),
        "change_high_pct": None if interval is None else _finite(round(interval[1], 3)),
        "verdict": None if change is None else change.verdict.value,
    }


def _json_safe(value: Any) -> Any:
    """``value`` with every float JSON cannot carry (inf, nan) as null, however deep."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _finite(value: float) -> float | None:
    """A figure JSON can carry: one too large for a float (a ratio of huge values) is null."""
    return value if math.isfinite(value) else None
