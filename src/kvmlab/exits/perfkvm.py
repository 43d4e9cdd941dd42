"""Import ``perf kvm stat``: its report text (``report``, or a ``live`` screen as users paste
it) or a ``perf.data.guest`` file, which ``perf kvm -i FILE stat report`` reads for us.

perf prints one table per ``--event``: VM exits by reason, I/O ports (``0x608:PIN``) or MMIO
addresses (``0xfed000f0:R``), each row ``KEY samples samples% time% min max avg (+- x%)``
with times in microseconds. perf's window is not in its output: ``live`` refreshes every
second by default, a report covers the recording; the caller says how long it was.

A text is read a chunk at a time and each table keeps its :data:`MAX_ROWS` most frequent
rows, so any file up to the cap takes linear time and little memory; rows perf cannot have
printed are skipped, and the profile says how many and which came first.
"""

from __future__ import annotations

import heapq
import os
import re
import shlex
import stat
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from kvmlab.errors import KvmlabError, ToolMissing, UsageError, printable
from kvmlab.exits.model import Folded, MmioStat, PioStat, Profile, ReasonStat, Skipped
from kvmlab.exits.names import mmio_name, port_name, reason_info

PROVIDER = "perf"
NOTE = "imported from perf kvm stat (its sampled window, its own exit accounting)"
PERF_MAGIC = b"PERFILE2"
MAX_TEXT_BYTES = 16 << 20
"""An imported report text is at most 16 MiB (a report or a ``live`` screen is a few KiB);
a perf.data file is read by perf, not by kvmlab, so it may be larger."""
PERF_TIMEOUT = 300.0
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class PerfFailed(KvmlabError):
    """perf could not report a recording in time."""

    exit_code = 3


MAX_ROWS = 50
"""Rows kept per table, the most frequent: more than a real report lists (perf prints the
reasons that occurred, a few dozen at most); the rest are folded (exit reasons: summed
into one row per kind), so a hostile file of 300,000 reasons stays a short table."""
LIMIT = 1 << 63
"""Counts and times (ns), and their sums per table, stay below 2**63: perf's counters are
64-bit, so a row at or over it was not printed by perf."""
MAX_NAME = 64
"""perf's names are at most 40 characters (KVM_EVENT_NAME_LEN); longer is not perf's."""
_CHUNK = 1 << 16
_NUM = rb"-?\d+(?:\.\d+)?"
_LINE = re.compile(
    rb"\s*(?:(VM-EXIT|IO Port|MMIO Access)|(\S+)\s+(-?\d+)\s+"
    + _NUM
    + rb"%\s+"
    + _NUM
    + rb"%\s+("
    + _NUM
    + rb")us\s+("
    + _NUM
    + rb")us\s+("
    + _NUM
    + rb")us)"
)
"""A table's header, or a row ``KEY samples samples% time% min max avg``; numbers may be
negative here so that such a row is reported, not passed over."""
_HEADS = {b"VM-EXIT": "reasons", b"IO Port": "pio", b"MMIO Access": "mmio"}
_PORT = re.compile(rb"(0x[0-9a-f]+):(PIN|POUT)", re.IGNORECASE)
_MMIO = re.compile(rb"(0x[0-9a-f]+):([RW])", re.IGNORECASE)
_EXAMPLE = "rows like 'IO_INSTRUCTION 55654 78.67% 42.39% 3.54us 74.94us 13.63us'"

_Key = str | tuple[int, bool]
_Row = tuple[int, int, _Key, int, int, int, str, int]
"""A row in a table's heap: ``(count, -seq, key, min_ns, max_ns, avg_ns, kind, line)``."""
MAX_TRACKED = 1024
"""Keys of a table remembered with their line, to refuse one listed twice: the first this
many (a real table has a few dozen), and beyond them those kept in the heap (the rows
shown), so a hostile file of 300,000 reasons stays in little memory."""
ROUNDING_NS = 10
"""perf prints times to 0.01 us: an average this far outside min..max is perf's rounding."""


class _Table:
    """One table as read: its :data:`MAX_ROWS` most frequent rows (a heap, ties kept in
    perf's order), and the others folded: one sum per kind for reasons, one in all else."""

    def __init__(self) -> None:
        self.heap: list[_Row] = []
        self.rows = 0
        self.count = 0
        self.time_ns = 0
        self.vendor = ""
        self.folded = [0, 0]  # rows, exits
        self.by_kind: dict[str, list[int]] = {}  # kind: [rows, exits, time, min, max]
        self.first_lines: dict[_Key, int] = {}  # the first MAX_TRACKED keys: their line
        self.kept_lines: dict[_Key, int] = {}  # the keys in the heap: their line

    def seen(self, key: _Key) -> int | None:
        """The line ``key`` was listed on before in this table (None: it was not, as far
        as the table remembers: see :data:`MAX_TRACKED`)."""
        return self.first_lines.get(key, self.kept_lines.get(key))

    def add(self, key: _Key, count: int, lo: int, hi: int, avg: int, line: int = 0) -> None:
        """Keep the row among the most frequent, or fold it (or the one it displaces)."""
        if len(self.first_lines) < MAX_TRACKED:
            self.first_lines[key] = line
        self.rows += 1
        self.count += count
        self.time_ns += avg * count
        kind = ""
        if isinstance(key, str):
            vendor, kind = reason_info(key)
            self.vendor = self.vendor or vendor
        row: _Row = (count, -self.rows, key, lo, hi, avg, kind, line)
        if len(self.heap) < MAX_ROWS:
            heapq.heappush(self.heap, row)
            self.kept_lines[key] = line
            return
        if row[:2] > self.heap[0][:2]:
            self.kept_lines[key] = line
            row = heapq.heapreplace(self.heap, row)
            self.kept_lines.pop(row[2], None)
        self._fold(row)

    def _fold(self, row: _Row) -> None:
        count, _, key, lo, hi, avg, kind, _ = row
        self.folded[0] += 1
        self.folded[1] += count
        if isinstance(key, str):
            acc = self.by_kind.setdefault(kind, [0, 0, 0, lo, hi])
            acc[0] += 1
            acc[1] += count
            acc[2] += avg * count
            acc[3] = min(acc[3], lo)
            acc[4] = max(acc[4], hi)

    def kept(self) -> list[_Row]:
        """The rows kept, most frequent first (perf's order among equals)."""
        return sorted(self.heap, key=lambda r: (-r[0], -r[1]))


class _Parser:
    """``perf kvm stat`` text, line by line, in bounded memory: a few rows per table.

    Rows perf cannot have printed are skipped and counted (a negative count, one past
    64 bits); a row that contradicts itself (a minimum above its maximum, an average
    outside them) or repeats a key of its table is refused, naming ``source`` and the
    line: the numbers of such a file cannot be told apart from the right ones."""

    def __init__(self, source: str = "the report") -> None:
        self.tables = {kind: _Table() for kind in _HEADS.values()}
        self.skipped: Skipped | None = None
        self.source = source

    def feed(self, number: int, line: bytes) -> None:
        """One line (``number`` counts from 1); a table's header starts that table anew,
        as each screen of a ``live`` log replaces the last."""
        m = _LINE.match(line)
        if m is None:
            return
        if m[1]:
            self.tables[_HEADS[m[1]]] = _Table()
            return
        raw = m[2]
        if len(raw) > MAX_NAME:
            self._skip(number, raw, f"a name of {len(raw)} characters (perf's have at most 40)")
            return
        count = _integer(m[3])
        if count is None:
            why = "is negative" if _negative(m[3]) else "is over 2**63-1"
            self._skip(number, raw, f"count {_shown(m[3], 24)} {why}")
            return
        times = [_ns(m[i]) for i in (4, 5, 6)]
        if None in times:
            bad = times.index(None)
            why = "is negative" if _negative(m[4 + bad]) else "is over 2**63 ns"
            self._skip(number, raw, f"time {_shown(m[4 + bad], 24)}us {why}")
            return
        lo, hi, avg = (t or 0 for t in times)
        self._consistent(number, raw, m, lo, hi, avg)
        key: _Key
        port = mmio = None
        if b":" in raw:  # 0x608:PIN, 0xfed000f0:R
            port, mmio = _PORT.fullmatch(raw), _MMIO.fullmatch(raw)
        if port:
            table, key = self.tables["pio"], (int(port[1], 16), port[2].upper() == b"POUT")
            if key[0] > 0xFFFF:
                self._skip(number, raw, "a port over 0xffff")
                return
        elif mmio:
            table, key = self.tables["mmio"], (int(mmio[1], 16), mmio[2].upper() == b"W")
            if key[0] >> 64:
                self._skip(number, raw, "an address over 64 bits")
                return
        else:
            key = raw.decode(errors="replace")
            table, key = self.tables["reasons"], key if key.isprintable() else printable(key)
        if table.count + count >= LIMIT or table.time_ns + avg * count >= LIMIT:
            self._skip(number, raw, "its table's exits or time add up past 2**63")
            return
        first = table.seen(key)
        if first is not None:
            raise UsageError(
                f"{self.source}: line {number}: {_shown(raw, 40)} is listed a second time "
                f"in its table (first on line {first}); perf kvm stat lists each once: "
                "import the report as perf printed it"
            )
        table.add(key, count, lo, hi, avg, number)

    def _consistent(
        self, number: int, raw: bytes, m: re.Match[bytes], lo: int, hi: int, avg: int
    ) -> None:
        """Refuse a row whose minimum is above its maximum, or whose average is outside
        them (beyond perf's rounding): perf computes all three from the same exits."""
        shown = f"{self.source}: line {number} ({_shown(raw, 40)})"
        said = tuple(_shown(m[i], 24) + "us" for i in (4, 5, 6))
        if lo > hi:
            why = f"min time {said[0]} is above max time {said[1]}"
        elif not lo - ROUNDING_NS <= avg <= hi + ROUNDING_NS:
            side = "below min time" if avg < lo else "above max time"
            why = f"avg time {said[2]} is {side} ({said[0]} to {said[1]})"
        else:
            return
        raise UsageError(
            f"{shown}: {why}; perf prints min <= avg <= max, so the row was edited or "
            "damaged: import the report as perf printed it"
        )

    def _skip(self, number: int, raw: bytes, why: str) -> None:
        if self.skipped is None:
            self.skipped = Skipped(rows=0, line=number, name=_shown(raw, 40), why=why)
        self.skipped.rows += 1

    def profile(self, address: str, seconds: float, source: str) -> Profile:
        """The profile of what was read; a :class:`UsageError` naming ``source`` when
        nothing in it counts."""
        profile = Profile(
            address=address,
            provider=PROVIDER,
            provider_note=NOTE,
            seconds=seconds,
            skipped=self.skipped,
        )
        reasons, pio, mmio = (self.tables[k] for k in ("reasons", "pio", "mmio"))
        if not (reasons.rows or pio.rows or mmio.rows):
            if self.skipped is not None:
                raise UsageError(
                    f"{source}: no row to count, only {self._skipped_text()}; "
                    "import the text perf printed, unedited"
                )
            raise UsageError(
                f"{source}: no perf kvm stat table found ({_EXAMPLE}); import "
                "the text 'perf kvm stat report' or 'live' printed, or the "
                "perf.data file"
            )
        for count, _, key, lo, hi, avg, kind, _ in sorted(reasons.heap, key=lambda r: -r[1]):
            profile.reasons.append(ReasonStat(str(key), kind, count, avg * count, lo, hi))
        for kind, (rows, count, time_ns, lo, hi) in sorted(reasons.by_kind.items()):
            name = f"({rows:,} more {kind} reasons)"
            profile.reasons.append(ReasonStat(name, kind, count, time_ns, lo, hi))
        profile.vendor = reasons.vendor
        profile.pio = [
            PioStat(port, write, count, name=port_name(port))
            for count, (port, write) in _pairs(pio.kept())
        ]
        profile.mmio = [
            MmioStat(gpa, write, count, name=mmio_name(gpa))
            for count, (gpa, write) in _pairs(mmio.kept())
        ]
        for kind, table, what in (
            ("reasons", reasons, "exit reasons"),
            ("pio", pio, "I/O ports"),
            ("mmio", mmio, "MMIO addresses"),
        ):
            rows, count = table.folded
            if not rows:
                continue
            profile.folded[kind] = Folded(rows=rows, count=count)
            how = (
                "summed in one row per kind, '(N more KIND reasons)'"
                if kind == "reasons"
                else "not listed"
            )
            profile.notes.append(
                f"{table.rows:,} {what}: the {len(table.heap)} most "
                f"frequent listed, the other {rows:,} ({count:,} exits) "
                f"{how}"
            )
        if self.skipped is not None:
            profile.notes.append(f"not counted: {self._skipped_text()}")
        return profile

    def _skipped_text(self) -> str:
        s = self.skipped
        assert s is not None
        rows = "1 row" if s.rows == 1 else f"{s.rows:,} rows"
        first = "" if s.rows == 1 else ", the first"
        return f"{rows} perf does not print{first} on line {s.line} ('{s.name}'): {s.why}"


def _pairs(rows: list[_Row]) -> list[tuple[int, tuple[int, bool]]]:
    """``(count, (number, write))`` of port and address rows."""
    return [(r[0], r[2]) for r in rows if isinstance(r[2], tuple)]


def _shown(raw: bytes, most: int) -> str:
    """Bytes from the file as text safe to print, cut to ``most`` characters."""
    text = printable(raw[: most * 4].decode(errors="replace"))
    return text if len(text) <= most else text[: most - 1] + "…"


def _negative(number: bytes) -> bool:
    """Whether a number as matched (``-0.00`` is not) is below zero."""
    return number.startswith(b"-") and bool(number.strip(b"-0."))


def _integer(digits: bytes) -> int | None:
    """A count, or None when negative or 2**63 or more (the length is checked first:
    Python converts no more than 4300 digits)."""
    if len(digits) < 19 and digits[0] != 45:  # not "-": the usual row, at once
        return int(digits)
    if _negative(digits):
        return None
    body = digits.lstrip(b"-0")
    if len(body) > 19 or int(body or b"0") >= LIMIT:
        return None
    return int(body or b"0")


def _ns(micros: bytes) -> int | None:
    """Microseconds as perf prints them (``3.54``) in ns, or None when negative or 2**63
    ns or more."""
    if len(micros) < 16 and micros[0] != 45:  # at most 10**15 us: the usual row, at once
        return round(float(micros) * 1000)
    if _negative(micros):
        return None
    whole, _, frac = micros.lstrip(b"-").partition(b".")
    whole = whole.lstrip(b"0") or b"0"
    if len(whole) > 17:
        return None
    value = round(float(whole + b"." + (frac[:12] or b"0")) * 1000)
    return value if value < LIMIT else None


def _lines_of(data: bytes, start: int = 1) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` of a text; a lone ``\\r`` also ends a line (a pasted report)."""
    for number, line in enumerate(data.split(b"\n"), start):
        if b"\r" in line:
            for part in line.split(b"\r"):
                yield number, part
        else:
            yield number, line


def parse_report(text: str, address: str, seconds: float, source: str | None = None) -> Profile:
    """Every table in perf's text; the last table of each kind wins (a ``live`` log).

    Rows perf cannot have printed (a negative count, one over 2**63-1, a name over
    :data:`MAX_NAME` characters) are skipped and said so in a note and ``skipped``;
    beyond :data:`MAX_ROWS` rows a table is folded (``folded``). Errors name ``source``
    (default: ``address``).
    """
    parser = _Parser(source or address)
    for number, line in _lines_of(text.encode(errors="replace")):
        parser.feed(number, line)
    return parser.profile(address, seconds, source or address)


def report_text(data_file: Path) -> str:
    """``perf kvm stat report`` of a recorded file, for each event kind perf has."""
    out = []
    absolute = str(data_file.absolute())  # absolute: perf reads standard input for "-i -"
    shown = printable(str(data_file))
    for event in ("vmexit", "ioport", "mmio"):
        argv = ["perf", "kvm", "-i", absolute, "stat", "report", f"--event={event}"]
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                stdin=subprocess.DEVNULL,
                timeout=PERF_TIMEOUT,
                check=False,
            )
        except FileNotFoundError:
            raise ToolMissing(
                "perf",
                "apt-get install linux-perf (a saved 'perf kvm stat "
                "report' text imports without it)",
            ) from None
        except subprocess.TimeoutExpired:
            raise PerfFailed(
                f"perf took over {PERF_TIMEOUT:g} s to report {shown}; run "
                f"'{printable(shlex.join(argv))}' and import its text"
            ) from None
        if proc.returncode != 0:
            if event == "vmexit":
                raise UsageError(_perf_refusal(shown, argv, proc.stderr, proc.returncode))
            continue  # perf of another architecture has no ioport/mmio report
        out.append(proc.stdout)
    return "\n".join(out)


_PERF_SAYS = (
    (
        ("no trace sample", "perf kvm record", "no samples"),
        "a perf.data file without KVM exit events; record one with 'perf kvm stat record -p "
        "PID' (PID: the guest's QEMU) and import it, or its 'perf kvm stat report' text",
    ),
    (
        ("not owned by current user",),
        "a perf.data file of another user, which perf does not read; copy it (cp) and import "
        "the copy",
    ),
    (
        (
            "incompatible file format",
            "initializing perf session",
            "header",
            "truncated",
            "failed to open",
            "can't open",
            "cannot open",
            "invalid",
        ),
        "starts like a perf.data file, but this host's perf cannot read it (cut short, damaged "
        "or from another perf version); import the text of 'perf kvm stat report' run where it "
        "was recorded",
    ),
)
"""What perf's complaints about a recording mean, in kvmlab's words (perf's own end in
advice such as "rerun with -v" that does not apply to kvmlab)."""


def _perf_refusal(shown: str, argv: list[str], stderr: str, code: int) -> str:
    """One line for perf's refusal (``argv``) to report ``shown``: what is wrong, the fix."""
    said = stderr.lower()
    meaning = next(
        (text for words, text in _PERF_SAYS if any(w in said for w in words)),
        f"perf cannot report it as a perf kvm stat recording (exit status {code}); "
        f"'{printable(shlex.join(argv))}' shows why, import its text once it "
        "works",
    )
    return f"{shown}: {meaning}"


def _read_lines(fd: int, shown: str, size: int) -> Iterator[tuple[int, bytes]]:
    """``(number, line)`` of the file, read a chunk at a time; a :class:`UsageError` when
    it grows over :data:`MAX_TEXT_BYTES` (``/dev/zero`` ends at once) or is binary."""
    if size > MAX_TEXT_BYTES:
        raise UsageError(_too_big(shown))
    done, number, parts = 0, 1, []
    while chunk := os.read(fd, min(_CHUNK, MAX_TEXT_BYTES + 1 - done)):
        done += len(chunk)
        if done > MAX_TEXT_BYTES:
            raise UsageError(_too_big(shown))
        if b"\0" in chunk:
            raise UsageError(
                f"{shown}: a binary file, neither a perf kvm stat report (text) "
                "nor a perf.data file"
            )
        cut = chunk.rfind(b"\n")
        if cut < 0:  # a line longer than a chunk: joined once, when it ends
            parts.append(chunk)
            continue
        parts.append(chunk[:cut])
        lines = b"".join(parts)
        yield from _lines_of(lines, number)
        number += lines.count(b"\n") + 1
        parts = [chunk[cut + 1 :]]
    if rest := b"".join(parts):
        yield from _lines_of(rest, number)


def _too_big(shown: str) -> str:
    return (
        f"{shown}: over {MAX_TEXT_BYTES >> 20} MiB, too large for a perf kvm stat report "
        "text (import the perf.data file, or 'perf kvm stat report' of it)"
    )


def import_file(path: Path, address: str, seconds: float) -> Profile:
    """A profile from a perf report text or a perf.data file (by its magic).

    The file is opened without blocking (a FIFO does not hang) and must be a regular file;
    a text is read up to :data:`MAX_TEXT_BYTES` (``/dev/zero`` is refused at once).
    """
    shown = printable(str(path))

    def refuse(mode: int) -> UsageError:
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        return UsageError(
            f"cannot import {shown}: {kind}; give a saved perf kvm stat "
            "report (text) or perf.data file"
        )

    try:  # a device is never opened: opening one can act (a watchdog arms, a tape rewinds)
        first = Path(path).stat()
        if not stat.S_ISREG(first.st_mode):
            raise refuse(first.st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot read {shown}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (first.st_dev, first.st_ino):
            raise refuse(st.st_mode)
        if os.pread(fd, len(PERF_MAGIC), 0) == PERF_MAGIC:
            parser = _Parser(f"{shown} (perf's report of it)")
            for number, line in _lines_of(report_text(path).encode(errors="replace")):
                parser.feed(number, line)
            profile = parser.profile(address, seconds, shown)
        else:
            parser = _Parser(shown)
            for number, line in _read_lines(fd, shown, st.st_size):
                parser.feed(number, line)
            profile = parser.profile(address, seconds, shown)
    except OSError as exc:
        raise UsageError(f"cannot read {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    profile.notes.append(f"imported from {shown}; window {seconds:g} s as given (--seconds)")
    return profile


def record_argv(pid: str, seconds: float, name: str) -> list[str]:
    """The command (``perf.sh``) that records QEMU ``pid`` (``@FILE``: the pid in FILE) for
    ``seconds`` where its KVM runs and prints perf's reports."""
    from kvmlab.exits.tracepoints import check_run_args

    check_run_args(name, seconds, pid)
    script = resources.files("kvmlab.exits").joinpath("perf.sh").read_text()
    return ["sh", "-c", script, "perf.sh", pid, f"{seconds:g}", name]
