"""Pydantic's validation errors said in kvmlab's words: the key as written, the value
(shortened when long) and what the key allows, on one line."""

from __future__ import annotations

import datetime
import difflib
import math
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from kvmlab.spec.devices import NIC_TYPES
from kvmlab.spec.units import NAME_PATTERN, number_text, quoted

NAME_RULE = "names are 1-32 lower-case letters, digits and '-', starting with a letter"

PATTERNS = {
    NAME_PATTERN: NAME_RULE,
    r"^[A-Za-z0-9_.-]+$": "it takes letters, digits, '_', '.' and '-'",
    r"^/[A-Za-z0-9_./-]*$": "it takes an absolute path of letters, digits, '_', '.', '-' and '/'",
    r"^[a-z_][a-z0-9_-]{0,31}$": (
        "user names are 1-32 lower-case letters, digits, '_' and '-', starting with a letter or '_'"
    ),
    r"^\d+[kKmMgG]$": "write a whole number with K, M or G, like '512M' or '1G'",
}
"""What each pattern a lab-file key is checked against allows, in words
(tests/spec/test_messages.py holds every pattern of the models to an entry here)."""

_RANGE_KINDS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}
_BOUNDS = ("gt", "ge", "lt", "le")


def format_loc(loc: Sequence[int | str]) -> str:
    """``("guests", "vm1", "nics", 0, "user", "mac")`` -> ``guests.vm1.nics[0].mac``.

    The discriminator tag pydantic inserts for NIC types and its ``[key]`` marker
    are dropped: they are not keys a user wrote. A key of more than 48 characters is
    shortened with an ellipsis.
    """
    out = ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]" or (isinstance(previous, int) and part in NIC_TYPES):
            pass
        else:
            part = part if len(part) <= 48 else f"{part[:48]}..."
            out += f".{part}" if out else part
        previous = part
    return out


def explain(err: ErrorDetails, root: type[BaseModel]) -> tuple[str, str]:
    """The key (from ``root``, the model of the whole document) and the message of one
    pydantic error, in kvmlab's words."""
    loc = err["loc"]
    key = format_loc(loc)
    kind = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    given = err.get("input")
    message = err["msg"].removeprefix("Value error, ")
    if kind == "when_tcg":  # raised by Guest, naming the key inside when_tcg in its context
        inner = f"when_tcg.{ctx['where']}"
        return (f"{key}.{inner}" if key else inner), str(ctx["message"])
    if kind == "extra_forbidden":
        message = "unknown key" + _suggestion(root, loc)
    elif kind == "missing":
        message = "required key is missing"
    elif loc and loc[-1] == "[key]":
        message = f"{quoted(str(loc[-2]))} is not a valid name: {NAME_RULE}"
    elif kind in ("model_type", "model_attributes_type", "dict_type") and not isinstance(
        given, dict
    ):
        message = _not_a_table(given, loc, ctx)
    elif kind == "int_parsing_size":
        allowed = _allowed(root, loc, ctx)
        message = f"{_shown_value(given)} is far too long a number: give {allowed}"
    elif isinstance(given, float) and not math.isfinite(given) and _wants_number(kind):
        what = "not a number" if math.isnan(given) else "not a finite number"
        allowed = _allowed(root, loc, ctx)
        message = f"{given} is {what}: give {allowed or 'a finite number'}"
    elif kind in _RANGE_KINDS:
        message = f"{_number(given)} is out of range: give {_allowed(root, loc, ctx)}"
    elif kind == "int_from_float":
        message = f"{_number(given)} is not a whole number: give {_allowed(root, loc, ctx)}"
    elif kind == "string_pattern_mismatch" and isinstance(given, str):
        rule = PATTERNS.get(str(ctx.get("pattern")), "see 'kvmlab check --explain' for its form")
        message = f"{quoted(given)} is not allowed here: {rule}"
    elif kind in ("string_too_long", "string_too_short") and isinstance(given, str):
        most, least = ctx.get("max_length"), ctx.get("min_length")
        limit = f"at most {most}" if kind == "string_too_long" else f"at least {least}"
        message = f"{quoted(given)} has {len(given)} characters; it takes {limit}"
    elif kind in ("too_long", "too_short"):
        most, least = ctx.get("max_length"), ctx.get("min_length")
        limit = f"at most {most}" if kind == "too_long" else f"at least {least}"
        message = f"has {ctx.get('actual_length')} entries; it takes {limit}"
    elif kind in _TYPE_WORDS:
        message = f"{_shown_value(given)} is not {_TYPE_WORDS[kind]}: "
        if kind.startswith(("int", "float")):
            message += f"give {_allowed(root, loc, ctx)}"
            whole = isinstance(given, float) and given.is_integer() and abs(given) < 1e15
            if whole and kind.startswith("int"):
                message += f" (write {int(given)}, without a decimal point)"
        elif kind.startswith("ip_") and isinstance(given, str):  # the example says it
            message = message.removesuffix(": ")
        else:
            message += _TYPE_FIXES.get(kind, "see 'kvmlab check --explain' for its form")
    elif kind in ("literal_error", "enum") and "expected" in ctx:
        message = f"{_shown_value(given)} is not one of {ctx['expected']}: write one of them"
    elif kind in ("union_tag_invalid", "union_tag_not_found") and "discriminator" in ctx:
        tag = str(ctx["discriminator"]).strip("'")
        found = given.get(tag) if isinstance(given, dict) else None
        expected = ctx.get("expected_tags") or ", ".join(repr(t) for t in NIC_TYPES)
        what = "has no type" if found is None else f"type {_shown_value(found)} is not known"
        message = f"{what}: give {tag} = one of {expected}"
    elif _echoes_input(kind):
        message = f"{message} (got {_shown_value(given)})"
    if isinstance(given, str) and len(given) > 60:  # a validator that echoed it whole
        message = message.replace(repr(given), quoted(given))
    return key, message


_TYPE_WORDS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text (a quoted string)",
    "list_type": "a list",
    "ip_v4_address": "an IPv4 address (like 127.0.0.1)",
    "ip_v4_network": "an IPv4 network (like 10.0.0.0/24)",
    "ip_v4_interface": "an IPv4 address with its prefix (like 10.0.0.1/24)",
    "ip_any_address": "an IP address",
}
"""pydantic's type errors, as what the key takes."""

_TYPE_FIXES = {
    "bool_type": "write true or false, without quotes",
    "bool_parsing": "write true or false, without quotes",
    "string_type": "write it as text in quotes",
    "list_type": "write a list in brackets, [ ... ]",
    "ip_v4_address": 'write one as text, e.g. "127.0.0.1"',
    "ip_v4_network": 'write one as text, e.g. "10.77.0.0/24"',
    "ip_v4_interface": 'write one as text, e.g. "10.77.0.11/24"',
    "ip_any_address": 'write one as text, e.g. "127.0.0.1"',
}
"""How to write a value of each type that is not a number (numbers are told their range)."""


def _shown_value(value: object) -> str:
    """A value as a message shows it: text quoted (and shortened), a list or table by its
    kind only, a float as TOML writes it (``2.0``, ``nan``), a date or time with its kind."""
    if isinstance(value, str):
        return quoted(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return _number(value)
    kind = _TOML_TIMES.get(type(value))
    if kind is not None:
        return f"{value.isoformat()} (a {kind})"  # type: ignore[attr-defined]
    return f"a value of type {type(value).__name__}"


_TOML_TIMES = {
    datetime.datetime: "date-time",
    datetime.date: "date",
    datetime.time: "time",
}
"""The TOML types tomllib reads as Python date and time objects, by name."""


def _wants_number(kind: str) -> bool:
    """Whether an error of ``kind`` is about a key that takes a number (so ``nan`` is told
    it is not a finite number, not that it is not true or false)."""
    return kind in _RANGE_KINDS or kind.startswith(("int", "float", "finite"))


def _not_a_table(given: object, loc: Sequence[int | str], ctx: dict[str, Any]) -> str:
    """What a value where a table goes is, and how to write the table."""
    name = next((str(p) for p in reversed(loc) if isinstance(p, str) and p != "[key]"), "")
    where = format_loc(loc)
    if ctx.get("class_name") == "Memory":
        return (
            f'{_shown_value(given)} is not a size or a table: write {name} = "2G" or '
            f'{name} = {{ size = "2G", ... }}'
        )
    if isinstance(loc[-1] if loc else None, int):  # an entry of a list of tables
        return f"{_shown_value(given)} is not a table: write each entry as {{ KEY = VALUE, ... }}"
    return (
        f"{_shown_value(given)} is not a table: write {name} = {{ KEY = VALUE, ... }} or a "
        f"[{where}] section"
    )


def _echoes_input(kind: str) -> bool:
    """Errors whose message is pydantic's own, with the value added."""
    return kind in {"literal_error", "enum", "union_tag_invalid"} or kind.endswith(
        ("_type", "_parsing")
    )


def _number(value: Any) -> str:
    """A number as a message shows it (``3600``, not ``3600.0``; never ``1e+06``); an
    integer of more than 30 digits by its length (Python does not print one of 4300)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return number_text(value)
    return quoted(value) if isinstance(value, str) else str(value)


def _allowed(root: type[BaseModel], loc: Sequence[int | str], ctx: dict[str, Any]) -> str:
    """``"a number above 0 and at most 3600"``: what the field at ``loc`` takes, from its
    constraints (and those pydantic reported)."""
    bounds = {k: ctx[k] for k in _BOUNDS if k in ctx}
    whole = False
    parent = _model_at(root, loc[:-1]) if loc and isinstance(loc[-1], str) else None
    field = parent.model_fields.get(str(loc[-1])) if parent is not None else None
    if field is not None:
        for item in field.metadata:
            bounds.update({k: getattr(item, k) for k in _BOUNDS if hasattr(item, k)})
        whole = _strip_optional(field.annotation) is int
    low = (
        f"above {_number(bounds['gt'])}"
        if "gt" in bounds
        else f"at least {_number(bounds['ge'])}"
        if "ge" in bounds
        else ""
    )
    high = (
        f"below {_number(bounds['lt'])}"
        if "lt" in bounds
        else f"at most {_number(bounds['le'])}"
        if "le" in bounds
        else ""
    )
    if "ge" in bounds and "le" in bounds:
        span = f"from {_number(bounds['ge'])} to {_number(bounds['le'])}"
    else:
        span = " and ".join(part for part in (low, high) if part)
    noun = "a whole number" if whole else "a number"
    return f"{noun} {span}" if span else noun


def _suggestion(root: type[BaseModel], loc: Sequence[int | str]) -> str:
    """``"; did you mean 'vcpus'?"`` for a misspelt key, from the model's own fields."""
    parent = _model_at(root, loc[:-1])
    if parent is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_at(root: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class whose table sits at ``loc`` below ``root`` (best effort)."""
    current: Any = root
    for part in loc:
        current = _strip_optional(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if not isinstance(part, str) or part not in current.model_fields:
                return None
            current = current.model_fields[part].annotation
            continue
        origin, args = typing.get_origin(current), typing.get_args(current)
        if origin is list and isinstance(part, int):
            current = args[0]
        elif origin is dict and isinstance(part, str):
            current = args[1]
        elif origin is typing.Annotated:
            current = _strip_optional(args[0])
            if typing.get_origin(current) in (typing.Union, types.UnionType):
                current = _union_member(current, part)
        else:
            return None
    current = _strip_optional(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    if typing.get_origin(tp) is typing.Annotated and not typing.get_args(tp)[1:]:
        return typing.get_args(tp)[0]
    return tp


def _union_member(union: Any, tag: int | str) -> Any:
    for member in typing.get_args(union):
        field = getattr(member, "model_fields", {}).get("type")
        if field is not None and tag in typing.get_args(field.annotation):
            return member
    return None
