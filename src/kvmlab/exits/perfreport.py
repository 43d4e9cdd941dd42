"""``perf report --stdio`` text as rows: who ran where, and how much of the samples.

perf prints a header (``# Samples: 404  of event 'cpu-clock'``, ``# Event count (approx.):
N``, ``# Total Lost Samples: N``), then a column header whose underline of dots gives each
column's span, then one row per sort key (``--sort pid,dso,sym``: ``23277:IO mon_iothread
[kernel.kallsyms] [k] do_syscall_64``), each perhaps followed by its call graph. Values
may hold spaces (a thread named ``CPU 0/KVM``, a C++ symbol), so a row is cut by the spans
of the dots, not by words; call-graph lines (``|``, ``---``, ``--5.84%--``, a flat chain's
bare percentages) fill no span but the first and are skipped, as are rows that do not
parse (counted in :attr:`Report.skipped`).

The columns kvmlab reads: ``Children`` and ``Self`` (``--children``; ``Overhead`` without
it), ``Samples`` (``-n``), ``Pid:Command`` (``--sort pid``: the thread id and its name),
``Command`` (``--sort comm``), ``Shared Object`` and ``Symbol`` (``[k] name``: ``k``
kernel, ``.`` user space, ``g``/``u`` a guest's kernel/user space as ``perf kvm --guest``
shows it, ``H`` hypervisor). Percentages are of all samples' period when perf was asked
for ``--percentage absolute`` (its default), so rows perf filters out leave a gap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LINE = 4096
"""A row longer than this is not perf's (its longest values are paths and C++ symbols)."""
_PCT = re.compile(r"^(\d+(?:\.\d+)?)%$")
_SAMPLES = re.compile(r"^#\s*Samples:\s*(\d+(?:\.\d+)?)\s*([KMG]?)\s+of event '([^']*)'")
_EVENT_COUNT = re.compile(r"^#\s*Event count \(approx\.\):\s*(\d+)")
_LOST = re.compile(r"^#\s*Total Lost Samples:\s*(\d+)")
_LEVEL = re.compile(r"^\[(.)\]\s+(.*)$")
_TID = re.compile(r"^\s*(-?\d+):(.*)$")


@dataclass(frozen=True)
class Row:
    """One row: a thread (``tid`` when sorted by pid), a shared object, a symbol."""

    comm: str
    dso: str
    level: str
    """``k``, ``.``, ``g``, ``u``, ``H``, or ``""`` when perf printed none."""
    symbol: str
    self_pct: float
    """Share of all samples' period that stopped in this symbol (percent)."""
    children_pct: float | None = None
    """Share whose call chain passes through it, itself included (``--children``)."""
    samples: int | None = None
    """Samples that stopped in it (``-n``)."""
    tid: int | None = None


@dataclass
class Report:
    """A report's rows and header."""

    rows: list[Row] = field(default_factory=list)
    event: str = ""
    samples: int | None = None
    """``# Samples:`` when exact (perf rounds 1000 and more to ``1K``: then None)."""
    samples_approx: int | None = None
    event_count: int | None = None
    """``# Event count (approx.)``: the periods' sum (nanoseconds for ``cpu-clock``)."""
    lost: int | None = None
    columns: tuple[str, ...] = ()
    skipped: int = 0
    """Lines in the table that looked like rows but did not parse."""

    @property
    def self_samples(self) -> int:
        """Samples of the rows (``-n``), zero without that column."""
        return sum(r.samples or 0 for r in self.rows)


def _spans(dots: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\.+", dots)]


def _names(header: str, spans: list[tuple[int, int]]) -> tuple[str, ...]:
    """The column names over ``spans``, cut as rows are (a name is right-aligned over
    numbers and left-aligned over names, like the values under it)."""
    return tuple(cell.lstrip("#").strip() for cell in _cells(header, spans))


def _cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    """The row's value in each column: between the end of the previous span and the start
    of the next (numbers are right-aligned, names left-aligned; the last runs to the end)."""
    cells = []
    for i in range(len(spans)):
        begin = spans[i - 1][1] if i else 0
        end = spans[i + 1][0] if i + 1 < len(spans) else len(line)
        cells.append(line[begin:end].strip())
    return cells


def _pct(text: str) -> float | None:
    m = _PCT.match(text)
    return float(m[1]) if m else None


def parse(text: str) -> Report:
    """The rows and header of one ``perf report --stdio`` output (the first table: a
    second event's table would start with another column header, and is ignored)."""
    report = Report()
    lines = text.splitlines()
    spans: list[tuple[int, int]] = []
    header = ""
    for line in lines:
        if line.startswith("#"):
            if spans:
                if _SAMPLES.match(line):
                    break  # a second event's table
                continue
            _header_line(report, line)
            if re.match(r"^#\s*\.", line) and header:
                spans = _spans(line)
                report.columns = _names(header, spans)
                if "Symbol" not in report.columns:
                    spans = []
            elif not re.match(r"^#\s*$", line):
                header = line
            continue
        if not spans or not line.strip() or len(line) > MAX_LINE:
            continue
        first = line.split(None, 1)[0]
        if not first.endswith("%") or first.startswith(("|", "-")):
            continue  # a call graph line
        row = _row(line, spans, report.columns)
        if row is None:
            report.skipped += 1
            continue
        report.rows.append(row)
    return report


def _header_line(report: Report, line: str) -> None:
    m = _SAMPLES.match(line)
    if m:
        report.event = m[3]
        value = float(m[1]) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m[2]]
        report.samples_approx = int(value)
        report.samples = int(value) if not m[2] else None
        return
    m = _EVENT_COUNT.match(line)
    if m:
        report.event_count = int(m[1])
        return
    m = _LOST.match(line)
    if m:
        report.lost = int(m[1])


def _row(line: str, spans: list[tuple[int, int]], columns: tuple[str, ...]) -> Row | None:
    cells = dict(zip(columns, _cells(line, spans), strict=True))
    self_pct = _pct(cells.get("Self", cells.get("Overhead", "")))
    if self_pct is None:
        return None
    children = None
    if "Children" in cells:
        children = _pct(cells["Children"])
        if children is None:
            return None
    samples = None
    if "Samples" in cells:
        if not cells["Samples"].isdigit():
            return None
        samples = int(cells["Samples"])
    tid, comm = None, cells.get("Command", "")
    if "Pid:Command" in cells:
        m = _TID.match(cells["Pid:Command"])
        if m is None:
            return None
        tid, comm = int(m[1]), m[2].strip()
    symbol = cells.get("Symbol", "")
    if not symbol:
        return None
    level = ""
    m = _LEVEL.match(symbol)
    if m:
        level, symbol = m[1], m[2].strip()
    return Row(
        comm=comm,
        dso=cells.get("Shared Object", ""),
        level=level,
        symbol=symbol,
        self_pct=self_pct,
        children_pct=children,
        samples=samples,
        tid=tid,
    )
