"""``query-migrate`` replies: parsed into samples, and shown as ``info migrate`` shows them.

Field names are QEMU's (``MigrationInfo`` and ``MigrationStats`` in qapi/migration.json);
a field this QEMU does not report stays ``None`` and is left out of the table. Units:
times in ms, sizes in bytes (``info migrate`` prints kbytes), ``mbps`` in Mbit/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FINISHED = ("completed", "failed", "cancelled")
"""Statuses after which the migration does not move any more."""

RAM_FIELDS = (
    "transferred",
    "remaining",
    "total",
    "duplicate",
    "skipped",
    "normal",
    "normal-bytes",
    "dirty-pages-rate",
    "mbps",
    "dirty-sync-count",
    "postcopy-requests",
    "page-size",
    "multifd-bytes",
    "pages-per-second",
    "precopy-bytes",
    "downtime-bytes",
    "postcopy-bytes",
    "dirty-sync-missed-zero-copy",
)
TOP_FIELDS = (
    "total-time",
    "expected-downtime",
    "downtime",
    "setup-time",
    "cpu-throttle-percentage",
    "postcopy-blocktime",
    "dirty-limit-throttle-time-per-round",
    "dirty-limit-ring-full-time",
)


@dataclass
class Sample:
    """One ``query-migrate`` reply, taken ``t`` seconds after the migration started."""

    t: float
    status: str
    ram: dict[str, float] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    """``total-time``, ``downtime``, ``expected-downtime``, ``setup-time`` and the rest of
    the top-level numbers this QEMU reports."""
    xbzrle: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def get(self, name: str) -> float | None:
        """A number by QEMU's name, RAM figures and top-level ones alike."""
        if name in self.ram:
            return self.ram[name]
        return self.times.get(name)

    def to_json(self) -> dict[str, Any]:
        """The sample as stored and printed by ``-o json``."""
        return asdict(self)


def parse(reply: dict[str, Any], t: float) -> Sample:
    """A ``query-migrate`` return value as a :class:`Sample` (unknown fields ignored)."""
    ram_in = reply.get("ram") or {}
    ram = {k: float(ram_in[k]) for k in RAM_FIELDS if isinstance(ram_in.get(k), int | float)}
    times = {k: float(reply[k]) for k in TOP_FIELDS if isinstance(reply.get(k), int | float)}
    xb = reply.get("xbzrle-cache") or {}
    xbzrle = {k: float(v) for k, v in xb.items() if isinstance(v, int | float)}
    return Sample(
        t=t,
        status=str(reply.get("status", "none")),
        ram=ram,
        times=times,
        xbzrle=xbzrle,
        error=reply.get("error-desc"),
    )


def info_migrate(sample: Sample) -> list[str]:
    """The HMP ``info migrate`` block of QEMU 7.2 for one sample (what the networking course
    lab copied)."""

    def num(name: str, unit: str = "", scale: float = 1.0) -> str | None:
        value = sample.get(name)
        if value is None:
            return None
        shown = value / scale
        text = f"{shown:.2f}" if name == "mbps" else f"{shown:.0f}"
        return f"{text}{unit}"

    rows: list[tuple[str, str | None]] = [
        ("Migration status", sample.status),
        ("total time", num("total-time", " ms")),
        (
            "expected downtime" if sample.status not in FINISHED else "downtime",
            num("expected-downtime" if sample.status not in FINISHED else "downtime", " ms"),
        ),
        ("setup", num("setup-time", " ms")),
        ("transferred ram", num("transferred", " kbytes", 1024)),
        ("throughput", num("mbps", " mbps")),
        ("remaining ram", num("remaining", " kbytes", 1024)),
        ("total ram", num("total", " kbytes", 1024)),
        ("duplicate", num("duplicate", " pages")),
        ("skipped", num("skipped", " pages")),
        ("normal", num("normal", " pages")),
        ("normal bytes", num("normal-bytes", " kbytes", 1024)),
        ("dirty sync count", num("dirty-sync-count")),
        ("page size", num("page-size", " kbytes", 1024)),
        ("multifd bytes", num("multifd-bytes", " kbytes", 1024)),
        ("pages-per-second", num("pages-per-second")),
        ("dirty pages rate", num("dirty-pages-rate", " pages")),
        ("precopy ram", num("precopy-bytes", " kbytes", 1024)),
        ("downtime ram", num("downtime-bytes", " kbytes", 1024)),
        ("postcopy ram", num("postcopy-bytes", " kbytes", 1024)),
        ("postcopy request count", num("postcopy-requests")),
        ("cpu throttle percentage", num("cpu-throttle-percentage")),
    ]
    if sample.error:
        rows.append(("error", sample.error))
    return [f"{label}: {value}" for label, value in rows if value is not None]


def passes(samples: list[Sample]) -> list[dict[str, float]]:
    """Per dirty-sync pass: when it began (s), bytes sent in it, its dirty-page rate."""
    out: list[dict[str, float]] = []
    last_sync, start, sent0 = None, 0.0, 0.0
    for s in samples:
        sync = s.ram.get("dirty-sync-count")
        if sync is None or sync == last_sync:
            continue
        sent = s.ram.get("transferred", 0.0)
        if out:
            out[-1]["bytes"] = sent - sent0
            out[-1]["seconds"] = s.t - start
        out.append(
            {
                "pass": sync,
                "start": s.t,
                "bytes": 0.0,
                "seconds": 0.0,
                "dirty-pages-rate": s.ram.get("dirty-pages-rate", 0.0),
            }
        )
        last_sync, start, sent0 = sync, s.t, sent
    if out and samples:
        out[-1]["bytes"] = samples[-1].ram.get("transferred", sent0) - sent0
        out[-1]["seconds"] = samples[-1].t - start
    return out
