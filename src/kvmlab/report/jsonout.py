"""The report as JSON, for other tools (docs/json-output.md).

Schema ``kvmlab.report/1``; with ``--compare`` each row names its own run and variant::

    {"schema": "kvmlab.report/1",
     "runs": [{"id", "lab", "suite", "spec_digest", "kvmlab_version", "started", "ended",
               "complete", "host": {...},
               "failures": [{"variant", "level", "guest", "stage" ("boot", a workload,
                             "teardown"), "message" (the error's first line),
                             "exit_code" (3 a component failed, 130 interrupted),
                             "detail" (its other lines)}]}],
     "rows": [{"run", "variant", "guest", "level", "accelerator", "workload", "metric",
               "unit", "higher_is_better", "value" (median), "min", "max", "stdev", "n",
               "spread_pct" ((max-min)/median*100), "change_pct" (vs the level below, or null),
               "command"}],
     "migrations": [{"run", "variant", "comparison" (as ``kvmlab migrate --lab -o json``
                     prints it: every strategy, outcome, time series and check)}]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from kvmlab.report.table import LevelTable
from kvmlab.results.model import Run

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
                rows.append({
                    "run": run_id, "variant": col.variant, "guest": col.guest,
                    "level": col.level, "accelerator": col.accel, "workload": row.workload,
                    "metric": row.metric, "unit": row.unit,
                    "higher_is_better": row.higher_is_better, "value": s.median,
                    "min": s.minimum, "max": s.maximum, "stdev": s.stdev, "n": s.n,
                    "spread_pct": round(s.spread_pct, 3),
                    "change_pct": None if cell.change_pct is None else round(cell.change_pct, 3),
                    "command": s.command,
                })  # fmt: skip
    moved = [{"run": run, "variant": variant, "comparison": doc}
             for run, variant, doc in migrations]  # fmt: skip
    return json.dumps({"schema": SCHEMA, "runs": [asdict(r) for r in runs], "rows": rows,
                       "migrations": moved}, indent=2)  # fmt: skip
