"""Import ``perf kvm stat``: its report text (``report``, or a ``live`` screen as users paste
it) or a ``perf.data.guest`` file, which ``perf kvm -i FILE stat report`` reads for us.

perf prints one table per ``--event``: VM exits by reason, I/O ports (``0x608:PIN``) or MMIO
addresses (``0xfed000f0:R``), each row ``KEY samples samples% time% min max avg (+- x%)``
with times in microseconds. perf's window is not in its output: ``live`` refreshes every
second by default, a report covers the recording; the caller says how long it was.
"""

from __future__ import annotations

import re
import subprocess
from importlib import resources
from pathlib import Path

from kvmlab.errors import ProcessFailure, UsageError
from kvmlab.exits.model import MmioStat, PioStat, Profile, ReasonStat
from kvmlab.exits.names import mmio_name, port_name, reason_kind, vendor_of

PROVIDER = "perf"
NOTE = "imported from perf kvm stat (its sampled window, its own exit accounting)"
PERF_MAGIC = b"PERFILE2"
_TIME = r"([\d.]+)us"
_ROW = re.compile(rf"^\s*(\S+)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%\s+{_TIME}\s+{_TIME}\s+{_TIME}")
_PORT = re.compile(r"^(0x[0-9a-f]+):(PIN|POUT)$", re.IGNORECASE)
_MMIO = re.compile(r"^(0x[0-9a-f]+):([RW])$", re.IGNORECASE)


def parse_report(text: str, address: str, seconds: float) -> Profile:
    """Every table in perf's text; the last table of each kind wins (a ``live`` log)."""
    profile = Profile(address=address, provider=PROVIDER, provider_note=NOTE, seconds=seconds)
    reasons: dict[str, ReasonStat] = {}
    pio: dict[tuple[int, bool], PioStat] = {}
    mmio: dict[tuple[int, bool], MmioStat] = {}
    for line in text.splitlines():
        if line.strip().startswith(("VM-EXIT", "IO Port", "MMIO Access")):
            table = line.split()[0]
            if table == "VM-EXIT":
                reasons = {}
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
    for event in ("vmexit", "ioport", "mmio"):
        argv = ["perf", "kvm", "-i", str(data_file), "stat", "report", f"--event={event}"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        except FileNotFoundError:
            raise UsageError("reading a perf.data file needs perf (apt-get install linux-perf); "
                             "a saved report text imports without it") from None  # fmt: skip
        if proc.returncode != 0:
            if event == "vmexit":
                raise ProcessFailure("perf could not read the recording", argv,
                                     proc.returncode, proc.stderr.splitlines()[-5:])  # fmt: skip
            continue  # perf of another architecture has no ioport/mmio report
        out.append(proc.stdout)
    return "\n".join(out)


def import_file(path: Path, address: str, seconds: float) -> Profile:
    """A profile from a perf report text or a perf.data file (by its magic)."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if head == PERF_MAGIC:
        text = report_text(path)
    else:
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    profile = parse_report(text, address, seconds)
    profile.notes.append(f"imported from {path}; window {seconds:g} s as given (--seconds)")
    return profile


def record_argv(pid: str, seconds: float, name: str) -> list[str]:
    """The command (``perf.sh``) that records QEMU ``pid`` (``@FILE``: the pid in FILE) for
    ``seconds`` where its KVM runs and prints perf's reports."""
    script = resources.files("kvmlab.exits").joinpath("perf.sh").read_text()
    return ["sh", "-c", script, "perf.sh", pid, f"{seconds:g}", name]
