"""A lab document written as a lab file a person reads: comments first, then the lab's
keys, each guest a ``[guests.NAME]`` table with its sections (``cpu``, ``memory``, ``clock``)
as tables, its disks and NICs as arrays of tables, anything deeper inline.

Every string is escaped for TOML (control characters, quotes, backslashes, and anything
outside printable ASCII as ``\\uXXXX``), so a hostile name in a domain's XML becomes text
in the file, never TOML syntax.
"""

from __future__ import annotations

import re
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def string(text: str) -> str:
    """A TOML basic string holding ``text`` exactly."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFFFF and not 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04X}")
        elif code > 0xFFFF:
            out.append(f"\\U{code:08X}")
        else:  # a lone surrogate: no TOML string can hold it
            out.append("\\uFFFD")
    out.append('"')
    return "".join(out)


def key(name: str) -> str:
    return name if _BARE.fullmatch(name) else string(name)


def value(item: Any) -> str:
    """A scalar, a list or a table written inline."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, float):
        return repr(item)
    if isinstance(item, str):
        return string(item)
    if isinstance(item, list):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if isinstance(item, dict):
        if not item:
            return "{}"
        return "{ " + ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items()) + " }"
    raise TypeError(f"not a TOML value: {type(item).__name__}")


def comment(text: str) -> str:
    """``# text`` on one line (line breaks and control characters escaped)."""
    shown = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)
    return f"# {shown}" if shown else "#"


def _table(lines: list[str], header: str, table: dict[str, Any], depth: int) -> None:
    """``table`` under ``header``: scalars first; at ``depth`` < 3 its dicts as tables and
    lists of dicts as arrays of tables; deeper, everything inline."""
    nested = depth < 3
    inline = {
        k: v
        for k, v in table.items()
        if not nested
        or not (isinstance(v, dict) or (isinstance(v, list) and v and isinstance(v[0], dict)))
    }
    if header and (inline or not table or header.startswith("[[")):
        lines.append("")
        lines.append(header)
    lines.extend(f"{key(k)} = {value(v)}" for k, v in inline.items())
    for k, v in table.items():
        if k in inline:
            continue
        path = f"{header.strip('[]')}.{key(k)}" if header else key(k)
        if isinstance(v, dict):
            _table(lines, f"[{path}]", v, depth + 1)
        else:
            for entry in v:
                _table(lines, f"[[{path}]]", entry, depth + 1)


def lab_text(doc: dict[str, Any], comments: list[str]) -> str:
    """The lab file for ``doc`` (name, description, guests, ...) with ``comments`` on top."""
    lines = [comment(c) for c in comments]
    if lines:
        lines.append("")
    _table(lines, "", doc, 0)
    return "\n".join(lines) + "\n"
