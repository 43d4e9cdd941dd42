"""What ``accel = "auto"`` means on this host, apart from the machinery that starts labs
(``kvmlab check`` and ``render`` ask it too, and need none of that)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kvmlab.render.target import Accel


@dataclass(frozen=True)
class HostAccel:
    """What ``accel = "auto"`` means on this host (decided by the caller from kvmlab.host)."""

    accel: Accel
    reason: str
    virt_flag: Literal["vmx", "svm"] | None = None
    """The host CPU's vmx/svm flag, for guest hypervisors with a named CPU model."""
