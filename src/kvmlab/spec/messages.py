"""Pydantic's validation errors said in kvmlab's words: the key as written, the value
(shortened when long) and what the key allows, on one line."""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from kvmlab.spec.devices import NIC_TYPES
from kvmlab.spec.units import NAME_PATTERN, quoted

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
    elif isinstance(given, float) and not math.isfinite(given):
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
    elif kind in _TYPE_WORDS and isinstance(given, str | int | float | bool | list | dict):
        shown = quoted(given) if isinstance(given, str) else _shown_value(given)
        allowed = _allowed(root, loc, ctx) if kind.startswith(("int", "float")) else ""
        message = f"{shown} is not {_TYPE_WORDS[kind]}" + (f": give {allowed}" if allowed else "")
    elif _echoes_input(kind) and isinstance(given, str | int | float | bool):
        shown = quoted(given) if isinstance(given, str) else repr(given)
        message = f"{message} (got {shown})"
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
    "dict_type": "a table",
    "model_type": "a table",
    "ip_v4_address": "an IPv4 address (like 127.0.0.1)",
    "ip_v4_network": "an IPv4 network (like 10.0.0.0/24)",
    "ip_v4_interface": "an IPv4 address with its prefix (like 10.0.0.1/24)",
    "ip_any_address": "an IP address",
}
"""pydantic's type errors, as what the key takes."""


def _shown_value(value: object) -> str:
    """A non-string value as a message shows it: a list or table by its kind only."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return "true" if value is True else "false" if value is False else _number(value)


def _echoes_input(kind: str) -> bool:
    """Errors whose message is pydantic's own, with the value added."""
    return kind in {"literal_error", "enum", "union_tag_invalid"} or kind.endswith(
        ("_type", "_parsing")
    )


def _number(value: Any) -> str:
    """A number as a message shows it (``3600``, not ``3600.0``; never ``1e+06``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
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
