"""A lab file's TOML errors in kvmlab's words: where (line, column), the key when it can be
told, and what fixes it.

tomllib says where it stopped, not which key: a key set twice is "Cannot overwrite a value
(at line 4, column 10)". The statement that ends there is found by parsing the lines before
it again (a few at most), and the table it is in by where a probe key lands when the text
before it is parsed. An integer too long for Python to read (4300 digits) is not a
``TOMLDecodeError`` but a ``ValueError`` without a position: its digits are found in the
text.
"""

from __future__ import annotations

import ast
import re
import tomllib
from typing import Any

from kvmlab.errors import Problem

_POS = re.compile(r"^(.*) \(at line (\d+), column (\d+)\)$", re.DOTALL)
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_KEY = re.compile(
    r"""\s*((?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
    r"""(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'))*)\s*="""
)
"""A key/value statement's key as written (bare, quoted or dotted), up to its ``=``."""
_LONG_INT = re.compile(r"(?<![\w.\"'])[+-]?(?:0[xob])?[0-9A-Fa-f_]{4000,}(?![\w.])")
"""An integer literal long enough that Python refuses to read it (4300 digits)."""
LOOK_BACK = 64
"""Lines a statement may span for its key to be named (a long multi-line array is not)."""
_PROBE = "kvmlab-probe-2c5e"
_SENTINEL = 7_356_214_908_117_004_213


def toml_problem(shown: str, text: str, exc: Exception) -> Problem:
    """One line for ``tomllib``'s refusal of ``text`` (a :class:`tomllib.TOMLDecodeError`,
    or the ``ValueError`` of an integer too long to read)."""
    if not isinstance(exc, tomllib.TOMLDecodeError):
        return _long_integer(shown, text)
    match = _POS.match(str(exc))
    if match is None:
        return Problem(shown, "", f"TOML syntax: {exc}; fix the file's TOML")
    message, line_s, column_s = match.groups()
    line, column = int(line_s), int(column_s)
    lines = text.split("\n")
    where = f"line {line}, column {column}"
    if message == "Cannot overwrite a value":
        key, header = _statement_key(lines, line, column)
        if key is None:
            said = "sets a key that is already set"
        elif header:
            said = f"[{key}] declares a table, but {key} already has a value"
        else:
            said = f"{key} is set a second time"
        fix = "a TOML file sets each key once: remove or merge one of the two"
        return Problem(shown, f"line {line}", f"{said}; {fix}")
    if declared := re.fullmatch(r"Cannot declare (\(.*\)) twice", message):
        key = _tuple_key(declared[1])
        return Problem(
            shown,
            f"line {line}",
            f"[{key}] is declared a second time; a table is declared once: merge the two "
            f"[{key}] sections into one",
        )
    if mutate := re.fullmatch(r"Cannot mutate immutable namespace (\(.*\))", message):
        key = _tuple_key(mutate[1])
        return Problem(
            shown,
            where,
            f"{key} is an inline table or array ({key} = {{ ... }} or [ ... ]), which "
            f"cannot be added to later: put everything inside it, or write [{key}] sections",
        )
    if dup := re.fullmatch(r"Duplicate inline table key (.*)", message):
        return Problem(
            shown,
            where,
            f"key {dup[1]} is set a second time in one inline table {{ ... }}: remove one "
            "of the two",
        )
    return Problem(shown, where, f"TOML syntax: {message}; fix the TOML there")


def _long_integer(shown: str, text: str) -> Problem:
    """The first integer of the text too long to read, by line, column and key."""
    found = next((m for m in _LONG_INT.finditer(text) if len(m[0].replace("_", "")) > 4300), None)
    what = (
        "longer than any TOML integer (at most 19 digits): give the value the key takes "
        "('kvmlab check --explain' lists them)"
    )
    if found is None:
        return Problem(shown, "", f"holds an integer of over 4300 digits, {what}")
    digits = len(found[0].replace("_", "").lstrip("+-"))
    line = text.count("\n", 0, found.start()) + 1
    column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
    # The key: the statement with the number replaced by one Python reads.
    patched = text[: found.start()] + str(_SENTINEL) + text[found.end() :]
    lines = patched.split("\n")
    key = _sentinel_key(lines, line)
    named = f"{key}: " if key else ""
    return Problem(
        shown, f"line {line}, column {column}", f"{named}an integer of {digits} digits, {what}"
    )


def _statement_key(lines: list[str], line: int, column: int) -> tuple[str | None, bool]:
    """The full key of the statement ending at ``line``:``column`` (1-based, just past
    it), and whether it is a table header; (None, False) when it cannot be told."""
    tail = lines[line - 1][: column - 1]
    if tail.lstrip().startswith("["):  # a header: tomllib stops before its closing ]
        for closed in (tail, f"{tail}]", f"{tail}]]"):
            if path := _header_path(closed.strip()):
                return _dotted(path), True
        return None, False
    for start in range(line, max(0, line - LOOK_BACK), -1):
        chunk = "\n".join([*lines[start - 1 : line - 1], tail])
        if not _parses(chunk):
            continue
        written = _KEY.match(chunk)
        if written is None:
            return None, False
        relative = _leaf_path(_loads(f"{written[1]} = 0"))
        if relative is None:
            return None, False
        return _dotted([*_table_at(lines, start), *relative]), False
    return None, False


def _sentinel_key(lines: list[str], line: int) -> str | None:
    """The full key whose value is :data:`_SENTINEL`, in the statement that holds it on
    ``line`` (whole lines: an inline table closes on its line, an array may go on)."""
    spans = [
        (start, end)
        for start in range(line, max(0, line - LOOK_BACK), -1)
        for end in range(line, min(len(lines), line + 4) + 1)
    ]
    for start, end in spans[: 4 * LOOK_BACK]:
        doc = _loads("\n".join(lines[start - 1 : end]))
        if doc is not None:
            path = _path_to(doc, _SENTINEL)
            if path is None:
                return None
            return _dotted([*_table_at(lines, start), *path])
    return None


def _table_at(lines: list[str], start: int) -> list[str | int]:
    """The table a statement starting on line ``start`` is in: where a probe key lands."""
    doc = _loads("\n".join([*lines[: start - 1], f"{_PROBE} = 0"]))
    path = _path_to(doc, 0, key=_PROBE) if doc is not None else None
    return path[:-1] if path else []


def _parses(text: str) -> bool:
    return _loads(text) is not None


def _loads(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return None


def _header_path(header: str) -> list[str | int] | None:
    """``[a.b]`` or ``[[a.b]]`` as its key path."""
    doc = _loads(header)
    path: list[str | int] = []
    node: Any = doc
    while isinstance(node, dict) and len(node) == 1:
        key, node = next(iter(node.items()))
        path.append(key)
        if isinstance(node, list) and len(node) == 1:
            node = node[0]
    return path or None


def _leaf_path(doc: dict[str, Any] | None) -> list[str | int] | None:
    """The path of the one leaf of ``KEY = 0`` parsed."""
    return _path_to(doc, 0) if doc is not None else None


def _path_to(node: Any, value: int, key: str | None = None) -> list[str | int] | None:
    """The path to the first ``value`` (under ``key``, if given) in a parsed document."""
    stack: list[tuple[Any, list[str | int]]] = [(node, [])]
    while stack:
        here, path = stack.pop()
        if isinstance(here, dict):
            for k, v in reversed(list(here.items())):
                if (key is None or k == key) and type(v) is int and v == value:
                    return [*path, k]
                stack.append((v, [*path, k]))
        elif isinstance(here, list):
            for i, v in reversed(list(enumerate(here))):
                stack.append((v, [*path, i]))
    return None


def _tuple_key(text: str) -> str:
    """tomllib's ``('guests', 'vm')`` as ``guests.vm``."""
    try:
        parts = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return _dotted(list(parts)) if isinstance(parts, tuple) else text


def _dotted(path: list[str | int]) -> str:
    """A key path as a lab file writes it (``guests.vm.nics[0].mac``; odd keys quoted)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = part if _BARE.fullmatch(part) else '"' + part.replace('"', '\\"') + '"'
        out += f".{name}" if out else name
    return out
