"""Value types of lab files: sizes, CPU sets, MAC addresses, names."""

from __future__ import annotations

import re
from fractions import Fraction
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, Strict
from pydantic_core import PydanticCustomError

from kvmlab.spec.names import NAME_PATTERN
from kvmlab.spec.values import GIB, KIB, MIB, TIB, format_size, number_text, quoted

__all__ = [  # re-exported: the lab's units
    "GIB",
    "KIB",
    "MIB",
    "NAME_PATTERN",
    "TIB",
    "format_size",
    "number_text",
    "quoted",
]

_UNITS = {"": MIB, "k": KIB, "m": MIB, "g": GIB, "t": TIB, "b": 1}
_SIZE_RE = re.compile(
    r"^\s*([0-9]{1,30})(?:\.([0-9]{1,12}))?\s*([kmgtb]?)(?:i?b)?\s*$", re.IGNORECASE
)
MAX_SIZE = 1 << 50
"""The largest size a lab names (1 PiB): beyond it is a typo, not a disk."""
MAX_MEMORY = 16 * TIB
"""The largest RAM a guest, a NUMA node or the switch is given."""


def parse_size(value: Any) -> int:
    """Bytes from ``"2G"``, ``"512M"``, ``"1GiB"`` (binary units) or an integer MiB count.

    An integer is MiB, as in QEMU's ``-m``; ``"4096B"`` is bytes. The value is exact (a
    fraction must come to whole bytes) and at most :data:`MAX_SIZE`.
    """
    if isinstance(value, bool):
        raise ValueError("expected a size such as '2G' or '512M'")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"size must be positive, got {number_text(value)}: give one like '2G'")
        size = value * MIB
        shown = number_text(value)
    elif isinstance(value, str):
        match = _SIZE_RE.match(value)
        if not match:
            raise ValueError(
                f"{quoted(value, 40)} is not a size; write it like '2G', '512M' or '1GiB'"
            )
        whole, fraction, unit = match.groups()
        exact = Fraction(f"{whole}.{fraction or 0}") * _UNITS[unit.lower()]
        if exact.denominator != 1 or exact <= 0:
            raise ValueError(f"{value!r} is not a positive whole number of bytes")
        size = int(exact)
        shown = repr(value)
    else:
        raise ValueError("expected a size such as '2G' or '512M'")
    if size > MAX_SIZE:
        largest = format_size(MAX_SIZE)
        raise ValueError(f"{shown} is larger than {largest}, the largest size a lab takes")
    return size


def parse_memory(value: Any) -> int:
    """RAM: a size in whole MiB (QEMU's ``-m`` and DPDK's ``-m`` take MiB), at most
    :data:`MAX_MEMORY`; another size is refused with the nearest ones that are."""
    size = parse_size(value)
    shown = repr(value) if isinstance(value, str) else format_size(size)
    if size > MAX_MEMORY:
        raise ValueError(f"{shown} is more RAM than {format_size(MAX_MEMORY)}")
    if size % MIB:
        below, above = size // MIB * MIB, (size // MIB + 1) * MIB
        near = " or ".join(repr(format_size(s)) for s in (below, above) if s > 0)
        raise ValueError(f"{shown} is not a whole number of MiB, which QEMU takes: use {near}")
    return size


Size = Annotated[int, BeforeValidator(parse_size), PlainSerializer(format_size, return_type=str)]
"""Bytes, written in a lab file as ``"2G"``, ``"512M"`` or an integer MiB count."""

MemorySize = Annotated[
    int, BeforeValidator(parse_memory), PlainSerializer(format_size, return_type=str)
]
"""RAM in bytes, a whole number of MiB, written like :data:`Size`."""


MAX_CPU = 8191
"""The largest CPU number a Linux host can have (x86_64's NR_CPUS is at most 8192): a CPU
set is checked against it before any range is expanded, so ``"0-99999999999"`` is one
line, not the host's memory."""

_CPU_PART = re.compile(r"^([0-9]{1,12})(?:-([0-9]{1,12}))?$")


def parse_cpuset(value: Any) -> tuple[int, ...]:
    """CPU numbers from a list-format set such as ``"0-3,6"`` (as in taskset and libvirt).

    Numbers are 0 to :data:`MAX_CPU`; whether this host has them is checked where the
    lab runs (:mod:`kvmlab.spec.hostcpus`), since a lab may be checked elsewhere."""
    if isinstance(value, bool):
        raise ValueError("expected a CPU set such as '0-3,6'")
    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise ValueError("expected a CPU set such as '0-3,6'")
        if isinstance(item, int) and not 0 <= item <= MAX_CPU:
            raise ValueError(
                f"CPU {number_text(item)} does not exist on any host: CPUs are numbered "
                f"0-{MAX_CPU} at most"
            )
    if isinstance(value, int):
        value = str(value)
    if isinstance(value, list | tuple):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a CPU set such as '0-3,6'")
    cpus: set[int] = set()
    for part in value.split(","):
        part = part.strip()
        match = _CPU_PART.match(part)
        if match is None:
            raise ValueError(f"{_shown(value)} is not a CPU set; write it like '0-3,6'")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if max(first, last) > MAX_CPU:
            raise ValueError(
                f"CPU {max(first, last)} in {_shown(value)} does not exist on any host: "
                f"CPUs are numbered 0-{MAX_CPU} at most"
            )
        if last < first:
            raise ValueError(f"range {part!r} in {_shown(value)} runs backwards")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def _shown(value: str) -> str:
    """A CPU set as an error message quotes it: at most 40 characters of it."""
    return quoted(value, 40)


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


PATH_MAX = 4095
"""The longest path Linux takes, in bytes (``PATH_MAX`` less its NUL)."""
NAME_MAX = 255
"""The longest name of one file or folder in a path, in bytes (Linux's ``NAME_MAX``)."""


def path_text(value: str) -> str:
    """``value`` when it can name a file: not empty, at most :data:`PATH_MAX` bytes and
    :data:`NAME_MAX` a name, no NUL, newline or other control character (a NUL would cut
    it short in QEMU's argv)."""
    if not value:
        raise ValueError("is empty; give a path")
    bad = next((i for i, c in enumerate(value) if not c.isprintable()), None)
    if bad is not None:
        raise ValueError(
            f"holds {value[bad]!r} at character {bad + 1}; a path is printable "
            "text, without NUL, newline or other control characters"
        )
    if len(value.encode()) > PATH_MAX:
        raise ValueError(
            f"{quoted(value)} is longer than {PATH_MAX} bytes, the longest path Linux takes"
        )
    long = next((p for p in value.split("/") if len(p.encode()) > NAME_MAX), None)
    if long is not None:
        raise ValueError(
            f"{quoted(value)} has a name of {len(long.encode())} bytes ({quoted(long, 24)}); "
            f"a file or folder name is at most {NAME_MAX} bytes: shorten it"
        )
    return value


PathText = Annotated[str, AfterValidator(path_text)]
"""A file path as a lab file gives it (relative or absolute): see :func:`path_text`."""


def one_line(value: str) -> str:
    """``value`` when it is one line of printable text (no newline, NUL or escape): what a
    kernel command line or an authorized_keys entry is."""
    bad = next((i for i, c in enumerate(value) if not c.isprintable()), None)
    if bad is not None:
        raise ValueError(
            f"holds {value[bad]!r} at character {bad + 1}; write it as one line of printable text"
        )
    return value


_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


def parse_mac(value: Any) -> str:
    """A unicast MAC address, normalised to lower case."""
    if not isinstance(value, str):
        raise ValueError("a MAC address is text: write it in quotes, like '52:54:00:12:34:56'")
    if not _MAC_RE.fullmatch(value.lower()):
        raise ValueError(f"{quoted(value)} is not a MAC address like '52:54:00:12:34:56'")
    mac = value.lower()
    if int(mac[:2], 16) & 1:
        raise ValueError(f"{value} is a multicast address; a NIC needs a unicast MAC")
    return mac


Mac = Annotated[str, BeforeValidator(parse_mac)]

CommandLine = Annotated[str, Field(max_length=2048), AfterValidator(one_line)]
"""A kernel command line: one printable line, at most the kernel's 2048 characters."""


def shell_words(value: str) -> str:
    """A command line split as a shell would, with at least a program: refused otherwise."""
    import shlex

    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"not shell words ({exc}): {value!r}") from None
    if not words:
        raise ValueError("an empty command")
    return value


BackgroundCommand = Annotated[
    str, Field(max_length=4096), AfterValidator(one_line), AfterValidator(shell_words)
]
"""A command a guest runs in the background: one printable line of shell words."""

KeyLine = Annotated[str, Field(max_length=16384), AfterValidator(one_line)]
"""One ``authorized_keys`` entry: one printable line."""


def _address_text(kind: type, error: str) -> BeforeValidator:
    """Text (or an already parsed ``kind``) for an address type: a boolean or number is
    refused as what it is, not read as an integer address (``true`` is not 0.0.0.1)."""

    def check(value: Any) -> Any:
        if isinstance(value, str | kind):
            return value
        raise PydanticCustomError(error, "not an address")

    return BeforeValidator(check)


Ipv4 = Annotated[IPv4Address, Strict(False), _address_text(IPv4Address, "ip_v4_address")]
"""An IPv4 address written as text, ``"127.0.0.1"``."""

Ipv4Interface = Annotated[
    IPv4Interface, Strict(False), _address_text(IPv4Interface, "ip_v4_interface")
]
"""An IPv4 address with its prefix, written as text, ``"10.77.0.11/24"``."""

Ipv4Network = Annotated[IPv4Network, Strict(False), _address_text(IPv4Network, "ip_v4_network")]
"""An IPv4 network written as text, ``"10.77.0.0/24"``."""
