"""Lab files: the pydantic models, their cross-field rules, and the loader.

Pure: nothing here starts a process or touches the host beyond reading the lab file.

The names below load their module on first use: a command that needs only
``kvmlab.spec.units`` (most of the CLI's option parsing) does not build every model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.lazy import lazy_names

if TYPE_CHECKING:  # (explicit re-exports, for the type checker)
    from kvmlab.spec.devices import CloudInit as CloudInit
    from kvmlab.spec.devices import Disk as Disk
    from kvmlab.spec.devices import Forward as Forward
    from kvmlab.spec.devices import Nic as Nic
    from kvmlab.spec.devices import TapNic as TapNic
    from kvmlab.spec.devices import UserNic as UserNic
    from kvmlab.spec.devices import VhostUserNic as VhostUserNic
    from kvmlab.spec.lab import Guest as Guest
    from kvmlab.spec.lab import Lab as Lab
    from kvmlab.spec.load import LoadedLab as LoadedLab
    from kvmlab.spec.load import load_lab as load_lab
    from kvmlab.spec.load import parse_lab as parse_lab
    from kvmlab.spec.machine import Clock as Clock
    from kvmlab.spec.machine import Cpu as Cpu
    from kvmlab.spec.machine import HyperV as HyperV
    from kvmlab.spec.machine import Memory as Memory
    from kvmlab.spec.machine import NumaCell as NumaCell
    from kvmlab.spec.machine import Pinning as Pinning
    from kvmlab.spec.machine import Timer as Timer

_WHERE = {
    **dict.fromkeys(
        ("CloudInit", "Disk", "Forward", "Nic", "TapNic", "UserNic", "VhostUserNic"), "devices"
    ),
    **dict.fromkeys(("Guest", "Lab"), "lab"),
    **dict.fromkeys(("LoadedLab", "load_lab", "parse_lab"), "load"),
    **dict.fromkeys(
        ("Clock", "Cpu", "HyperV", "Memory", "NumaCell", "Pinning", "Timer"), "machine"
    ),
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_names(__name__, _WHERE, globals())
