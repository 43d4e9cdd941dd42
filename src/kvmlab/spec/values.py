"""Plain values the lab models share with commands that never load them: binary size units
and their spelling, numbers and text as messages quote them (``ps`` prints a size and reads
run records without loading pydantic)."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
TIB = 1024 * GIB


def format_size(size: int) -> str:
    """The shortest exact binary-unit spelling of ``size`` bytes (``2G``, ``1536M``)."""
    for suffix, unit in (("T", TIB), ("G", GIB), ("M", MIB), ("K", KIB)):
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return f"{size}B"


def number_text(value: int) -> str:
    """An integer as a message shows it: its digits, or past 30 of them its length (Python
    does not even print one of more than 4300 digits)."""
    if abs(value) < 10**30:
        return str(value)
    return f"a number of about {int(abs(value).bit_length() * 0.30103) + 1} digits"


def quoted(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message; past ``limit`` characters, its start, an ellipsis and
    its length (a 3000-character value is never echoed whole)."""
    if len(text) <= limit:
        return repr(text)
    start = repr(text[:limit])
    return f"{start[:-1]}...{start[-1]} ({len(text)} characters)"
