"""`netcompare` as the networking course lab shows it: one row per network path with every
test beside the others, and one row per path and channel count for multiqueue, with the
spread."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvmlab.report.grid import Col
from kvmlab.results.model import Summary

WORKLOAD = "netcompare"
SEP = ": "
_QUEUES = re.compile(r"^(\d+)q (tcp P\d+ (?:->|<-))( busiest rx queue)?$")
_SIDE = ("queue pairs in use", " busiest rx queue", " rx queues used")


@dataclass(frozen=True)
class Grid:
    """A table ready for :func:`kvmlab.report.grid.print_grid`."""

    title: str
    columns: list[Col]
    rows: list[list[str]]


def cell(s: Summary | None) -> str:
    """``0.659 ±4%`` (median, half the min-max spread), ``-`` when not measured."""
    if s is None:
        return "-"
    half = s.spread_pct / 2
    return f"{s.median:.3g} ±{half:.0f}%" if s.n > 1 else f"{s.median:.3g}"


def grids(
    summaries: Sequence[Summary], documents: Sequence[tuple[str, dict[str, Any]]] = ()
) -> list[Grid]:
    """The path table and the multiqueue table of each variant (none without netcompare);
    the documents add each channel count's spread over the RX queues."""
    mine = [s for s in summaries if s.workload == WORKLOAD and SEP in s.metric]
    out: list[Grid] = []
    variants = list(dict.fromkeys(s.variant for s in mine))
    for variant in variants:
        by: dict[str, dict[str, Summary]] = {}
        for s in (s for s in mine if s.variant == variant):
            path, _, test = s.metric.partition(SEP)
            by.setdefault(path, {})[test] = s
        shown = "" if len(variants) == 1 else f" ({variant})"
        out.append(_paths(by, shown))
        spreads = {
            path: nic.get("spreads", {})
            for v, doc in documents
            if v == variant
            for path, nic in doc.get("multiqueue", {}).items()
        }
        queues = _queues(by, shown, spreads)
        if queues is not None:
            out.append(queues)
    return out


def _paths(by: dict[str, dict[str, Summary]], shown: str) -> Grid:
    tests = list(
        dict.fromkeys(
            t
            for tests in by.values()
            for t in tests
            if not _QUEUES.match(t) and not t.endswith(_SIDE) and t not in _SIDE
        )
    )
    units = {t: next(s.unit for x in by.values() for n, s in x.items() if n == t) for t in tests}
    columns = [Col("path"), *(Col(f"{t}\n{units[t]}", "right") for t in tests)]
    rows = [[path, *(cell(got.get(t)) for t in tests)] for path, got in by.items()]
    return Grid(
        f"netcompare{shown}: every path (->: the first guest sends; median ±half the spread)",
        columns,
        rows,
    )


def _rx_spread(lines: Sequence[str]) -> str:
    """``27/25/24/24 %`` of the RX packets (of the RX interrupts when not counted)."""
    for prefix in ("rx ", "rx irq "):
        for line in lines:
            if line.startswith(prefix) and ":" in line:
                return line.partition(": ")[2]
    return "-"


def _queues(
    by: dict[str, dict[str, Summary]], shown: str, spreads: dict[str, dict[str, list[str]]]
) -> Grid | None:
    per: dict[tuple[str, int], dict[str, Summary]] = {}
    for path, got in by.items():
        for test, s in got.items():
            if m := _QUEUES.match(test):
                head = m.group(2) + (" busiest rx queue" if m.group(3) else "")
                per.setdefault((path, int(m.group(1))), {})[head] = s
    if not per:
        return None
    heads = sorted({h for v in per.values() for h in v if "busiest" not in h})
    order = sorted(per, key=lambda k: (list(by).index(k[0]), k[1]))
    rows = [
        [
            path,
            str(n),
            *(cell(per[(path, n)].get(h)) for h in heads),
            *(_rx_spread(spreads.get(path, {}).get(f"{n}q {h}", [])) for h in heads),
        ]
        for path, n in order
    ]
    columns = [
        Col("path"),
        Col("queues", "right"),
        *(Col(f"{h}\nGbit/s", "right") for h in heads),
        *(Col(f"{h}\nRX queues %", "right") for h in heads),
    ]
    return Grid(
        f"netcompare{shown}: multiqueue, channels set in the guests (ethtool -L)", columns, rows
    )


def notes(documents: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """Left-out paths and multiqueue findings kept with the run, one line each."""
    out: list[str] = []
    for variant, doc in documents:
        shown = "" if variant == "default" else f"{variant}: "
        out += [f"{shown}left out {why}" for why in doc.get("left_out", [])]
        for path, nic in doc.get("multiqueue", {}).items():
            out.append(
                f"{shown}{path}: {nic.get('guest')} {nic.get('device')}: "
                f"{nic.get('in_use')} of {nic.get('asked')} queue pair(s) in use"
            )
            out += [
                f"{shown}{path}: FINDING {f['what']}: {f['reason']}; fix: {f['fix']}"
                for f in nic.get("findings", [])
            ]
    return out
