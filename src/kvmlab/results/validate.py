"""What the results database holds, checked like user input before kvmlab uses it.

A database can be changed outside kvmlab (by hand, by another program, by a damaged disk),
so every value read back is checked here: its type, its size, a number finite and a time in
range, JSON bounded in size and depth with finite numbers only, and a run's documents in
the shape the reports read. A check that fails raises :class:`Unreadable` with what is
wrong (``started is 'yesterday', not a time in seconds``); the store names the file and
the row, and leaves that row out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from kvmlab.errors import printable
from kvmlab.results.model import MIGRATION_DOCUMENT, NETCOMPARE_DOCUMENT

NAME_LIMIT = 4096
"""Characters of a name (lab, variant, guest, level, workload, metric, unit, suite, ...)."""
TEXT_LIMIT = 1 << 20
"""Characters of a command (a script, as run) or an error's first line."""
DETAIL_LIMIT = 1 << 20
"""Characters of an error's other lines."""
HOST_LIMIT = 1 << 20
"""Characters of a run's host facts (JSON)."""
DOCUMENT_LIMIT = 1 << 28
"""Characters of one stored document (JSON): 256 MiB."""
JSON_DEPTH = 64
"""Nesting of arrays and objects in stored JSON (kvmlab's own go 9 deep)."""
INT_DIGITS = 30
"""Digits of an integer in stored JSON (byte counts need 13)."""
TIME_MIN, TIME_MAX = 0.0, 253370764800.0
"""Times a run may carry: from 1970 up to 9999-01-01, which every date function prints."""


class Unreadable(ValueError):
    """A stored value that is not what kvmlab wrote: the message says which and why."""


def shown(value: object, limit: int = 40) -> str:
    """A stored value as an error line shows it: its repr, shortened, escaped."""
    if isinstance(value, bytes):
        return f"a blob of {len(value)} bytes"
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return printable(text)


def text(field: str, value: object, limit: int = NAME_LIMIT) -> str:
    """A text value of at most ``limit`` characters."""
    if not isinstance(value, str):
        raise Unreadable(f"{field} is {shown(value)}, not text")
    if len(value) > limit:
        raise Unreadable(f"{field} is longer than {limit} characters")
    return value


def number(field: str, value: object) -> float:
    """A finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Unreadable(f"{field} is {shown(value)}, not a number")
    if not math.isfinite(value):
        raise Unreadable(f"{field} is {shown(value)}, not a finite number")
    return float(value)


def moment(field: str, value: object) -> float:
    """A time in seconds since 1970 that dates print (up to the year 9999)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Unreadable(f"{field} is {shown(value)}, not a time in seconds")
    if not (math.isfinite(value) and TIME_MIN <= value <= TIME_MAX):
        raise Unreadable(f"{field} is {shown(value)}, not a time between 1970 and 9999")
    return float(value)


def integer(field: str, value: object, low: int, high: int) -> int:
    """A whole number in ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Unreadable(f"{field} is {shown(value)}, not a whole number")
    if not low <= value <= high:
        raise Unreadable(f"{field} is {value}, not in {low}..{high}")
    return value


def flag(field: str, value: object) -> bool:
    """A boolean as SQLite keeps it: 0 or 1."""
    if isinstance(value, bool) or value not in (0, 1) or not isinstance(value, int):
        raise Unreadable(f"{field} is {shown(value)}, not 0 or 1")
    return bool(value)


def choice(field: str, value: object, allowed: tuple[str, ...]) -> str:
    """One of ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise Unreadable(f"{field} is {shown(value)}, not one of {', '.join(allowed)}")
    return value


def _constant(name: str) -> Any:
    raise Unreadable(f"holds {name}, which is not a number")


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise Unreadable(f"holds {shown(literal)}, too large for a number")
    return value


def _int(literal: str) -> int:
    if len(literal.lstrip("-")) > INT_DIGITS:
        raise Unreadable(f"holds an integer of more than {INT_DIGITS} digits")
    return int(literal)


def load_json(field: str, value: object, limit: int) -> Any:
    """Stored JSON: text of at most ``limit`` characters, nested at most :data:`JSON_DEPTH`
    deep, every number finite."""
    body = text(field, value, limit)
    try:
        data = json.loads(body, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except Unreadable as exc:
        raise Unreadable(f"{field} {exc}") from None
    except RecursionError:
        raise Unreadable(f"{field} is nested more than {JSON_DEPTH} deep") from None
    except ValueError as exc:  # JSONDecodeError, an integer beyond Python's digits
        raise Unreadable(f"{field} is not JSON ({printable(str(exc))[:80]})") from None
    if depth(data) > JSON_DEPTH:
        raise Unreadable(f"{field} is nested more than {JSON_DEPTH} deep")
    return data


def depth(data: Any) -> int:
    """How deep arrays and objects nest in ``data`` (0 for a scalar); without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            level += 1
            deepest = max(deepest, level)
            if level > JSON_DEPTH:
                return level
            stack.extend((child, level) for child in item if isinstance(child, dict | list))
    return deepest


def json_object(field: str, value: object, limit: int) -> dict[str, Any]:
    """Stored JSON that must be an object."""
    data = load_json(field, value, limit)
    if not isinstance(data, dict):
        raise Unreadable(f"{field} is {type_name(data)}, not a JSON object")
    return data


def type_name(data: object) -> str:
    """``null``, ``an array``, ``a string``: a JSON value's kind, for an error line."""
    if data is None:
        return "null"
    if isinstance(data, bool):
        return "a boolean"
    if isinstance(data, list):
        return "an array"
    if isinstance(data, dict):
        return "an object"
    if isinstance(data, str):
        return "a string"
    return "a number"


# -- documents -----------------------------------------------------------------------------


class _Shape:
    """Checks on one document, each naming the place that is wrong (``strategies[0].name``)."""

    def obj(self, where: str, value: object) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise Unreadable(f"{where} is {type_name(value)}, not an object")
        return value

    def arr(self, where: str, value: object) -> list[Any]:
        if not isinstance(value, list):
            raise Unreadable(f"{where} is {type_name(value)}, not an array")
        return value

    def string(self, where: str, value: object) -> str:
        if not isinstance(value, str):
            raise Unreadable(f"{where} is {type_name(value)}, not a string")
        return value

    def num(self, where: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Unreadable(f"{where} is {type_name(value)}, not a number")
        return float(value)

    def count(self, where: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise Unreadable(f"{where} is {shown(value)}, not a count")
        return value

    def scalar(self, where: str, value: object) -> None:
        if isinstance(value, dict | list):
            raise Unreadable(f"{where} is {type_name(value)}, not a single value")


def migrations_problem(doc: Any) -> None:
    """A ``migrations`` document (``kvmlab migrate LAB -o json``) in the shape the reports
    read: strategies with a name, a mode, counts, summaries and outcomes whose samples
    carry numbers."""
    c = _Shape()
    body = c.obj("the document", doc)
    for i, item in enumerate(c.arr("strategies", body.get("strategies"))):
        at = f"strategies[{i}]"
        s = c.obj(at, item)
        c.string(f"{at}.name", s.get("name"))
        c.string(f"{at}.spec.mode", c.obj(f"{at}.spec", s.get("spec")).get("mode"))
        c.count(f"{at}.verified", s.get("verified"))
        c.count(f"{at}.runs", s.get("runs"))
        for metric, got in c.obj(f"{at}.summary", s.get("summary")).items():
            if got is None:
                continue
            place = f"{at}.summary.{metric}"
            figures = c.obj(place, got)
            c.string(f"{place}.unit", figures.get("unit"))
            for key in ("median", "min", "max"):
                c.num(f"{place}.{key}", figures.get(key))
            c.count(f"{place}.n", figures.get("n"))
        for j, raw in enumerate(c.arr(f"{at}.outcomes", s.get("outcomes"))):
            place = f"{at}.outcomes[{j}]"
            outcome = c.obj(place, raw)
            c.string(f"{place}.verdict", outcome.get("verdict"))
            for k, point in enumerate(c.arr(f"{place}.samples", outcome.get("samples"))):
                spot = f"{place}.samples[{k}]"
                p = c.obj(spot, point)
                c.num(f"{spot}.t", p.get("t"))
                for name, figure in c.obj(f"{spot}.ram", p.get("ram")).items():
                    c.num(f"{spot}.ram.{name}", figure)


def netcompare_problem(doc: Any) -> None:
    """A ``netcompare`` document: paths left out, and per path its NIC's multiqueue."""
    c = _Shape()
    body = c.obj("the document", doc)
    for i, why in enumerate(c.arr("left_out", body.get("left_out", []))):
        c.string(f"left_out[{i}]", why)
    for path, raw in c.obj("multiqueue", body.get("multiqueue", {})).items():
        at = f"multiqueue.{path}"
        nic = c.obj(at, raw)
        for key in ("guest", "device", "in_use", "asked"):
            c.scalar(f"{at}.{key}", nic.get(key))
        for label, lines in c.obj(f"{at}.spreads", nic.get("spreads", {})).items():
            for j, line in enumerate(c.arr(f"{at}.spreads.{label}", lines)):
                c.string(f"{at}.spreads.{label}[{j}]", line)
        for j, found in enumerate(c.arr(f"{at}.findings", nic.get("findings", []))):
            finding = c.obj(f"{at}.findings[{j}]", found)
            for key in ("what", "reason", "fix"):
                c.string(f"{at}.findings[{j}].{key}", finding.get(key))


DOCUMENT_SHAPES: dict[str, Callable[[Any], None]] = {
    MIGRATION_DOCUMENT: migrations_problem,
    NETCOMPARE_DOCUMENT: netcompare_problem,
}
"""The documents kvmlab reads back by kind (see :mod:`kvmlab.results.model`); any other
kind only has to be a JSON object."""


def document(field: str, kind: str, value: object) -> dict[str, Any]:
    """A stored document of ``kind``: a bounded JSON object in that kind's shape."""
    doc = json_object(field, value, DOCUMENT_LIMIT)
    check = DOCUMENT_SHAPES.get(kind)
    if check is not None:
        try:
            check(doc)
        except Unreadable as exc:
            place = printable(str(exc))
            raise Unreadable(f"{field}: {place[:200]}") from None
    return doc
