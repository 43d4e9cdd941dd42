"""Value types of lab files: sizes, CPU sets, MAC addresses, names."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
TIB = 1024 * GIB

_UNITS = {"": MIB, "k": KIB, "m": MIB, "g": GIB, "t": TIB, "b": 1}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtb]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: Any) -> int:
    """Bytes from ``"2G"``, ``"512M"``, ``"1GiB"`` (binary units) or an integer MiB count.

    An integer is MiB, as in QEMU's ``-m``; ``"4096B"`` is bytes.
    """
    if isinstance(value, bool):
        raise ValueError("expected a size such as '2G' or '512M'")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"size must be positive, got {value}")
        return value * MIB
    if not isinstance(value, str):
        raise ValueError("expected a size such as '2G' or '512M'")
    match = _SIZE_RE.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a size; write it like '2G', '512M' or '1GiB'")
    number, unit = match.groups()
    size = float(number) * _UNITS[unit.lower()]
    if size != int(size) or size <= 0:
        raise ValueError(f"{value!r} is not a positive whole number of bytes")
    return int(size)


def format_size(size: int) -> str:
    """The shortest exact binary-unit spelling of ``size`` bytes (``2G``, ``1536M``)."""
    for suffix, unit in (("T", TIB), ("G", GIB), ("M", MIB), ("K", KIB)):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return f"{size}B"


Size = Annotated[int, BeforeValidator(parse_size), PlainSerializer(format_size, return_type=str)]
"""Bytes, written in a lab file as ``"2G"``, ``"512M"`` or an integer MiB count."""


def parse_cpuset(value: Any) -> tuple[int, ...]:
    """CPU numbers from a list-format set such as ``"0-3,6"`` (as in taskset and libvirt)."""
    if isinstance(value, bool):
        raise ValueError("expected a CPU set such as '0-3,6'")
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, list | tuple):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a CPU set such as '0-3,6'")
    cpus: set[int] = set()
    for part in value.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"{value!r} is not a CPU set; write it like '0-3,6'")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"range {part!r} in {value!r} runs backwards")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpuset(cpus: tuple[int, ...]) -> str:
    """``(0, 1, 2, 3, 6)`` -> ``"0-3,6"``."""
    parts: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


CpuSet = Annotated[
    tuple[int, ...],
    BeforeValidator(parse_cpuset),
    PlainSerializer(format_cpuset, return_type=str),
]
"""A set of CPU numbers, written ``"0-3,6"``."""

_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


def parse_mac(value: Any) -> str:
    """A unicast MAC address, normalised to lower case."""
    if not isinstance(value, str) or not _MAC_RE.match(value.lower()):
        raise ValueError(f"{value!r} is not a MAC address like '52:54:00:12:34:56'")
    mac = value.lower()
    if int(mac[:2], 16) & 1:
        raise ValueError(f"{value} is a multicast address; a NIC needs a unicast MAC")
    return mac


Mac = Annotated[str, BeforeValidator(parse_mac)]

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
"""Lab and guest names: lower case, digits and dashes, used in paths and addresses."""
