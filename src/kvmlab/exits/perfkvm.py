"""Import ``perf kvm stat``: its report text (``report``, or a ``live`` screen as users paste
it) or a ``perf.data.guest`` file, which ``perf kvm -i FILE stat report`` reads for us.

perf prints one table per ``--event``: VM exits by reason, I/O ports (``0x608:PIN``) or MMIO
addresses (``0xfed000f0:R``), each row ``KEY samples samples% time% min max avg (+- x%)``
with times in microseconds. perf's window is not in its output: ``live`` refreshes every
second by default, a report covers the recording; the caller says how long it was.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
from importlib import resources
from pathlib import Path

from kvmlab.bounded import read_at_most
from kvmlab.errors import KvmlabError, ToolMissing, UsageError, printable
from kvmlab.exits.model import MmioStat, PioStat, Profile, ReasonStat
from kvmlab.exits.names import mmio_name, port_name, reason_kind, vendor_of

PROVIDER = "perf"
NOTE = "imported from perf kvm stat (its sampled window, its own exit accounting)"
PERF_MAGIC = b"PERFILE2"
MAX_TEXT_BYTES = 16 << 20
"""An imported report text is at most 16 MiB (a report or a ``live`` screen is a few KiB);
a perf.data file is read by perf, not by kvmlab, so it may be larger."""
PERF_TIMEOUT = 300.0
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))  # fmt: skip


class PerfFailed(KvmlabError):
    """perf could not report a recording in time."""

    exit_code = 3


_NUM = r"\d+(?:\.\d+)?"
_TIME = rf"({_NUM})us"
_ROW = re.compile(rf"^\s*(\S+)\s+(\d+)\s+({_NUM})%\s+({_NUM})%\s+{_TIME}\s+{_TIME}\s+{_TIME}")
_PORT = re.compile(r"^(0x[0-9a-f]+):(PIN|POUT)$", re.IGNORECASE)
_MMIO = re.compile(r"^(0x[0-9a-f]+):([RW])$", re.IGNORECASE)


def parse_report(text: str, address: str, seconds: float) -> Profile:
    """Every table in perf's text; the last table of each kind wins (a ``live`` log)."""
    profile = Profile(address=address, provider=PROVIDER, provider_note=NOTE, seconds=seconds)
    reasons: dict[str, ReasonStat] = {}
    pio: dict[tuple[int, bool], PioStat] = {}
    mmio: dict[tuple[int, bool], MmioStat] = {}
    for line in text.splitlines():
        head = line.strip()
        table = next((t for t in (("VM-EXIT", reasons), ("IO Port", pio), ("MMIO Access", mmio))
                      if head.startswith(t[0])), None)  # fmt: skip
        if table is not None:  # a table's header: a new screen of a live log replaces the last
            table[1].clear()
            continue
        row = _ROW.match(line)
        if not row:
            continue
        key, count = row[1], int(row[2])
        lo, hi, avg = (round(float(row[i]) * 1000) for i in (5, 6, 7))
        if m := _PORT.match(key):
            port, write = int(m[1], 16), m[2].upper() == "POUT"
            pio[(port, write)] = PioStat(port, write, count, name=port_name(port))
        elif m := _MMIO.match(key):
            gpa, write = int(m[1], 16), m[2].upper() == "W"
            mmio[(gpa, write)] = MmioStat(gpa, write, count, name=mmio_name(gpa))
        else:
            reasons[key] = ReasonStat(key, reason_kind(key), count, time_ns=avg * count,
                                      min_ns=lo, max_ns=hi)  # fmt: skip
    if not reasons and not pio and not mmio:
        raise UsageError(f"{address}: no perf kvm stat table found (rows like 'IO_INSTRUCTION "
                         "55654 78.67% 42.39% 3.54us 74.94us 13.63us')")  # fmt: skip
    profile.reasons = list(reasons.values())
    profile.vendor = next((v for r in profile.reasons if (v := vendor_of(r.reason))), "")
    profile.pio = sorted(pio.values(), key=lambda s: -s.count)
    profile.mmio = sorted(mmio.values(), key=lambda s: -s.count)
    return profile


def report_text(data_file: Path) -> str:
    """``perf kvm stat report`` of a recorded file, for each event kind perf has."""
    out = []
    absolute = str(data_file.absolute())  # absolute: perf reads standard input for "-i -"
    shown = printable(str(data_file))
    for event in ("vmexit", "ioport", "mmio"):
        argv = ["perf", "kvm", "-i", absolute, "stat", "report", f"--event={event}"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  stdin=subprocess.DEVNULL, timeout=PERF_TIMEOUT,
                                  check=False)  # fmt: skip
        except FileNotFoundError:
            raise ToolMissing("perf", "apt-get install linux-perf (a saved 'perf kvm stat "
                              "report' text imports without it)") from None  # fmt: skip
        except subprocess.TimeoutExpired:
            raise PerfFailed(f"perf took over {PERF_TIMEOUT:g} s to report {shown}; run "
                             f"'{printable(shlex.join(argv))}' and import its text"
                             ) from None  # fmt: skip
        if proc.returncode != 0:
            if event == "vmexit":
                said = next((line.strip() for line in proc.stderr.splitlines()
                             if line.strip()), f"exit code {proc.returncode}")  # fmt: skip
                raise UsageError(f"perf cannot read {shown} as a perf kvm stat recording: "
                                 f"{printable(said)}")  # fmt: skip
            continue  # perf of another architecture has no ioport/mmio report
        out.append(proc.stdout)
    return "\n".join(out)


def _read_text(fd: int, shown: str, size: int) -> str:
    """The file's text, refused when over :data:`MAX_TEXT_BYTES` or binary."""
    if size > MAX_TEXT_BYTES:
        raise UsageError(_too_big(shown))
    data = read_at_most(fd, MAX_TEXT_BYTES)
    if data is None:
        raise UsageError(_too_big(shown))
    if b"\0" in data:
        raise UsageError(f"{shown}: a binary file, neither a perf kvm stat report (text) "
                         "nor a perf.data file")  # fmt: skip
    return data.decode(errors="replace")


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
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot read {shown}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
            raise UsageError(f"cannot import {shown}: {kind}; give a saved perf kvm stat "
                             "report (text) or perf.data file")  # fmt: skip
        head = os.pread(fd, len(PERF_MAGIC), 0)
        text = report_text(path) if head == PERF_MAGIC else _read_text(fd, shown, st.st_size)
    except OSError as exc:
        raise UsageError(f"cannot read {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    profile = parse_report(text, address, seconds)
    profile.notes.append(f"imported from {shown}; window {seconds:g} s as given (--seconds)")
    return profile


def record_argv(pid: str, seconds: float, name: str) -> list[str]:
    """The command (``perf.sh``) that records QEMU ``pid`` (``@FILE``: the pid in FILE) for
    ``seconds`` where its KVM runs and prints perf's reports."""
    from kvmlab.exits.tracepoints import check_run_args

    check_run_args(name, seconds, pid)
    script = resources.files("kvmlab.exits").joinpath("perf.sh").read_text()
    return ["sh", "-c", script, "perf.sh", pid, f"{seconds:g}", name]
