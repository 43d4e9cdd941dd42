"""Lab files: the pydantic models, their cross-field rules, and the loader.

Pure: nothing here starts a process or touches the host beyond reading the lab file.
"""

from kvmlab.spec.devices import CloudInit, Disk, Forward, Nic, TapNic, UserNic, VhostUserNic
from kvmlab.spec.lab import Guest, Lab
from kvmlab.spec.load import LoadedLab, load_lab, parse_lab
from kvmlab.spec.machine import Clock, Cpu, HyperV, Memory, NumaCell, Pinning, Timer

__all__ = [
    "Clock",
    "CloudInit",
    "Cpu",
    "Disk",
    "Forward",
    "Guest",
    "HyperV",
    "Lab",
    "LoadedLab",
    "Memory",
    "Nic",
    "NumaCell",
    "Pinning",
    "TapNic",
    "Timer",
    "UserNic",
    "VhostUserNic",
    "load_lab",
    "parse_lab",
]
