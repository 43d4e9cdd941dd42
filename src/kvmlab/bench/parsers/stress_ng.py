"""stress-ng metrics: the ``--yaml FILE`` report or the ``--metrics[-brief]`` table.

Per stressor ``S`` (e.g. ``cpu``): ``S_bogo_ops_per_s`` (per second of wall-clock
time) and ``S_bogo_ops_per_cpu_s`` (per second of user+system CPU time). Bogo-ops
compare runs of the same stress-ng version and stressor only.
"""

from __future__ import annotations

import re

from kvmlab.bench.parsers._common import NUMBER, Source, decimal
from kvmlab.bench.parsers.metric import Metric

# stress-ng: metrc: [20860] cpu   3872   2.00   2.02   0.00   1934.23   1913.25
# (stressor, bogo ops, real/usr/sys secs, bogo ops/s real time, bogo ops/s usr+sys time)
_TABLE_ROW = re.compile(
    rf"^stress-ng: metrc: \[\d+\] (\S+)\s+\d+\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}"
    rf"\s+({NUMBER})\s+({NUMBER})",
    re.MULTILINE,
)
_FAILED = re.compile(r"^stress-ng: (?:fail|error):.*$|^.*unsuccessful run.*$", re.MULTILINE)
_COMPLAINT = re.compile(r"^stress-ng: (?!info:|metrc:|debug:|warn:)(.+)$", re.MULTILINE)
_YAML_ITEM = re.compile(r"^\s*(-\s+)?([a-z][a-z0-9-]*):\s*(\S.*?)\s*$")
_UNIT = "bogo-ops/s"


def parse_stress_ng(text: str) -> list[Metric]:
    """Bogo-ops rates of each stressor; raises ParseError on a failed or empty run."""
    src = Source("stress-ng", text)
    failed = _FAILED.search(text)
    if failed:
        raise src.error(failed.group(0).strip())
    if re.search(r"^metrics:\s*$", text, re.MULTILINE):
        rows = _yaml_rows(src)
    else:
        rows = [(m[1], float(m[2]), float(m[3])) for m in _TABLE_ROW.finditer(text)]
    if not rows:
        complaint = _COMPLAINT.search(text)
        raise src.error(
            complaint.group(1).strip()
            if complaint
            else "no stressor metrics (was --metrics, --metrics-brief or --yaml given?)"
        )
    metrics: list[Metric] = []
    for stressor, real, cpu in rows:
        name = stressor.replace("-", "_")
        metrics.append(Metric(f"{name}_bogo_ops_per_s", real, _UNIT, True))
        metrics.append(Metric(f"{name}_bogo_ops_per_cpu_s", cpu, _UNIT, True))
    return metrics


def _yaml_rows(src: Source) -> list[tuple[str, float, float]]:
    """(stressor, ops/s real time, ops/s usr+sys time) from the ``metrics:`` list."""
    items: list[dict[str, str]] = []
    in_metrics = False
    for line in src.text.splitlines():
        if not line.startswith(" "):
            in_metrics = line.strip() == "metrics:"
            continue
        match = _YAML_ITEM.match(line)
        if not in_metrics or match is None:
            continue
        if match.group(1):
            items.append({})
        if items:
            items[-1][match.group(2)] = match.group(3).strip("'\"")
    rows = []
    for item in items:
        stressor = item.get("stressor")
        real = decimal(item.get("bogo-ops-per-second-real-time", ""))
        cpu = decimal(item.get("bogo-ops-per-second-usr-sys-time", ""))
        if stressor is None or real is None or cpu is None:
            raise src.error(f"incomplete metrics entry {stressor or '?'!r}")
        rows.append((stressor, real, cpu))
    return rows
