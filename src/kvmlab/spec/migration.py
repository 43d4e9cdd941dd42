"""``[[migrations]]`` of a lab: live migrations `kvmlab migrate --lab` and `kvmlab run` run and
compare."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kvmlab.spec.base import SpecModel
from kvmlab.spec.units import NAME_PATTERN

MigrationMode = Literal[
    "precopy", "postcopy", "multifd", "auto-converge", "xbzrle", "dirty-limit", "auto"
]


class MigrationSpec(SpecModel):
    """One migration strategy, run `repetitions` times with a dirtying workload."""

    name: str = Field(pattern=NAME_PATTERN)
    """Its label in the comparison (`qemu-default`, `postcopy`, ...)."""

    guest: str = Field(pattern=NAME_PATTERN)
    """The top-level guest to migrate; it needs `migratable = true`."""

    mode: MigrationMode = "precopy"
    """`precopy`, `postcopy` (switched after `postcopy_after` passes), `multifd`,
    `auto-converge`, `xbzrle`, `dirty-limit` (QEMU 8.1+), or `auto`: it runs after the
    fixed strategies of each round and takes, with its own settings, the one of the same
    guest, workload and bandwidth with the most runs verified and then the least pause of
    the guest (the longer of the heartbeat and network gaps, median); before any, kvmlab
    watches the first passes and switches to postcopy when precopy would not reach
    `downtime_limit_ms`."""

    downtime_limit_ms: int | None = Field(default=None, ge=1, le=2000000)
    """QEMU's `downtime-limit` (default 300 ms); for `auto`, the target (default 50 ms)."""

    bandwidth_mibs: float | None = Field(default=None, gt=0, le=1e6)
    """QEMU's `max-bandwidth` in MiB/s (default 128)."""

    multifd_channels: int | None = Field(default=None, ge=1, le=255)
    """multifd: parallel channels (default 2)."""

    postcopy_after: int = Field(default=1, ge=1, le=1000)
    """postcopy: switch after this many dirty-sync passes."""

    dirty_mib: int = Field(default=128, ge=1, le=1 << 20)
    """Working set the guest's dirtier writes, MiB."""

    dirty_rate_mibs: float = Field(default=20.0, ge=0, le=1e6)
    """The dirtier's rate, MiB/s: 20 by default, as `kvmlab migrate --dirty`, which a
    migration converges under even on a TCG host (0: as fast as the guest can, which may
    never converge)."""

    max_seconds: float = Field(default=300.0, ge=1, le=86400)
    """Give up after this long (see `on_timeout`)."""

    on_timeout: Literal["cancel", "postcopy"] = "cancel"
    """`cancel` (the source keeps running) or switch to `postcopy`."""

    repetitions: int = Field(default=5, ge=1, le=100)
    """How often it runs (strategies alternate; median and spread are taken over them)."""
