"""Migration strategies as QMP capabilities and parameters on each side.

Each mode names the capabilities it needs on the source and on the destination (postcopy
and multifd must be on both) and its parameters; :func:`plan` checks them against what
this QEMU offers (``query-migrate-capabilities``) so an unsupported mode is refused before
anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvmlab.errors import UsageError

MODES = ("precopy", "postcopy", "multifd", "auto-converge", "xbzrle", "dirty-limit", "auto")
AUTO_TARGET_MS = 50
"""``auto``: the downtime aimed at when none is given."""
AUTO_PASSES = 2
"""``auto``: passes precopy gets (the bulk copy and one more) before postcopy takes over."""


MANAGED_CAPS = ("postcopy-ram", "multifd", "auto-converge", "xbzrle", "dirty-limit")
"""Capabilities kvmlab sets on every migration, off unless the mode needs them: a QEMU that
was the destination of an earlier migration keeps what was set on it then."""
DEFAULT_PARAMS = {"downtime-limit": 300, "max-bandwidth": 128 * 1024 * 1024, "multifd-channels": 2}
"""QEMU's defaults (7.2 and 10.0), set again on every migration for the same reason."""


@dataclass(frozen=True)
class Settings:
    """What the user chose (``None``: QEMU's default)."""

    mode: str = "precopy"
    downtime_limit_ms: int | None = None
    bandwidth_mibs: float | None = None
    multifd_channels: int | None = None
    postcopy_after_pass: int = 1
    """postcopy: switch after this many dirty-sync passes (1: after the bulk copy)."""
    max_seconds: float = 300.0
    """A migration still running after this long is given up: cancelled, or switched to
    postcopy when ``on_timeout`` says so."""
    on_timeout: str = "cancel"
    compare_pages: bool = False
    """Compare every page of guest RAM on both sides at the switch-over, the destination
    held paused until it is done (:mod:`kvmlab.migrate.pages`)."""


@dataclass(frozen=True)
class Plan:
    """Capabilities and parameters to set, per side."""

    settings: Settings
    source_caps: dict[str, bool] = field(default_factory=dict)
    dest_caps: dict[str, bool] = field(default_factory=dict)
    source_params: dict[str, Any] = field(default_factory=dict)
    dest_params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line: the mode and every capability and parameter set."""
        caps = [k for k, v in self.source_caps.items() if v and k != "events"]
        params = [f"{k}={v}" for k, v in self.source_params.items() if DEFAULT_PARAMS.get(k) != v]
        return f"{self.settings.mode} ({', '.join(caps + params) or 'QEMU defaults'})"


def plan(settings: Settings, offered: set[str]) -> Plan:
    """The capabilities and parameters for ``settings``; a mode needing a capability this
    QEMU lacks is a :class:`UsageError` naming it."""
    mode = settings.mode
    if mode not in MODES:
        raise UsageError(f"unknown migration mode {mode!r} (known: {', '.join(MODES)})")
    both: dict[str, bool] = {}
    source: dict[str, bool] = {"events": True}
    params: dict[str, Any] = {}
    dest_params: dict[str, Any] = {}
    if mode in ("postcopy", "auto") or settings.on_timeout == "postcopy":
        if mode == "multifd":
            raise UsageError(
                "--on-timeout postcopy cannot go with multifd (QEMU: postcopy is "
                "not yet compatible with multifd)"
            )
        both["postcopy-ram"] = True  # set before the start: the switch may come later
    if mode == "multifd":
        both["multifd"] = True
        channels = settings.multifd_channels or 2
        params["multifd-channels"] = dest_params["multifd-channels"] = channels
    elif mode == "auto-converge":
        source["auto-converge"] = True
    elif mode == "xbzrle":
        source["xbzrle"] = True
    elif mode == "dirty-limit":
        source["dirty-limit"] = True
    for cap in {**both, **source}:
        if cap not in offered:
            raise UsageError(
                f"mode {mode}: this QEMU has no migration capability {cap!r} "
                f"(it offers: {', '.join(sorted(offered))})"
            )
    if settings.downtime_limit_ms is not None:
        params["downtime-limit"] = settings.downtime_limit_ms
    elif mode == "auto":
        params["downtime-limit"] = AUTO_TARGET_MS
    if settings.bandwidth_mibs is not None:
        params["max-bandwidth"] = int(settings.bandwidth_mibs * 1024 * 1024)
    off = {cap: False for cap in MANAGED_CAPS if cap in offered}
    return Plan(
        settings,
        {**off, **both, **source},
        {**off, **both},
        {**DEFAULT_PARAMS, **params},
        {**DEFAULT_PARAMS, **dest_params},
    )


def check_settings(settings: Settings) -> None:
    """Refuse values that cannot work, before anything starts."""
    if settings.mode not in MODES:
        raise UsageError(f"unknown migration mode {settings.mode!r} (known: {', '.join(MODES)})")
    if settings.downtime_limit_ms is not None and not 1 <= settings.downtime_limit_ms <= 2000000:
        raise UsageError("--downtime-limit must be 1..2000000 ms")
    if settings.bandwidth_mibs is not None and not 0 < settings.bandwidth_mibs <= 1e6:
        raise UsageError("--bandwidth must be more than 0 and at most 1000000 MiB/s")
    if settings.multifd_channels is not None and not 1 <= settings.multifd_channels <= 255:
        raise UsageError("--multifd-channels must be 1..255")
    if not 1 <= settings.max_seconds <= 86400:
        raise UsageError("--max-time must be 1..86400 s")
    if settings.on_timeout not in ("cancel", "postcopy"):
        raise UsageError("--on-timeout must be cancel or postcopy")
    if settings.compare_pages and (
        settings.mode in ("postcopy", "auto") or settings.on_timeout == "postcopy"
    ):
        raise UsageError(
            "--compare-pages compares RAM once all of it is on both sides: a precopy mode "
            "(postcopy runs the destination before its pages are there)"
        )
