"""The lab-file reference, generated from the models so it is never written twice."""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from kvmlab.spec.devices import NicBase, TapNic, UserNic, VhostUserNic
from kvmlab.spec.lab import Guest, Lab
from kvmlab.spec.units import (
    CpuSet,
    Mac,
    MemorySize,
    Size,
    format_size,
    parse_cpuset,
    parse_mac,
    parse_memory,
    parse_size,
)


@dataclass(frozen=True)
class KeyDoc:
    """One key of a lab file."""

    key: str
    type: str
    default: str
    meaning: str


_NAMED_TYPES: dict[Any, str] = {Size: "size", MemorySize: "size", CpuSet: "cpu set", Mac: "MAC"}
_NIC_MEMBERS = (UserNic, TapNic, VhostUserNic)


def _type_name(tp: Any) -> str:
    for named, label in _NAMED_TYPES.items():
        if tp == named:
            return label
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        labels = dict.fromkeys(_type_name(m) for m in members)
        return " | ".join(labels)
    if origin is list:
        inner = _type_name(args[0])
        return "list of tables" if inner == "table" else f"list of {inner}"
    if origin is dict:
        inner = _type_name(args[1])
        return "tables by name" if inner == "table" else f"table of {inner}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "table"
    return getattr(tp, "__name__", str(tp))


_VALIDATOR_TYPES: dict[object, str] = {
    parse_size: "size",
    parse_memory: "size",
    parse_cpuset: "cpu set",
    parse_mac: "MAC",
}


def _field_type(info: FieldInfo) -> str:
    """The type label of a field; pydantic moves ``Annotated`` metadata off the annotation."""
    for meta in info.metadata:
        func = getattr(meta, "func", None)
        if func in _VALIDATOR_TYPES:
            return _VALIDATOR_TYPES[func]
    return _type_name(info.annotation)


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined:
        return "required"
    value = info.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "(table)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | dict) and not value:
        return "[]" if isinstance(value, list) else "{}"
    if _field_type(info) == "size":
        return f'"{format_size(int(value))}"'
    return str(value)


def _doc(model: type[BaseModel], name: str, info: FieldInfo) -> str:
    return " ".join((info.description or attribute_doc(model, name)).split())


def attribute_doc(model: type[BaseModel], name: str) -> str:
    """The docstring under field ``name``'s annotation in the class that annotates it last
    (its own, else the nearest base's): what pydantic's ``use_attribute_docstrings`` makes
    the field's description. Read here, for the reference alone: that option parses the
    source of every model whenever the models are imported, by every command."""
    for cls in model.__mro__:
        if name in vars(cls).get("__annotations__", {}):
            return _class_docs(cls.__module__).get(cls.__qualname__, {}).get(name, "")
    return ""


@functools.cache
def _class_docs(module: str) -> dict[str, dict[str, str]]:
    """Attribute docstrings of each class of ``module`` (by qualified name), from one parse
    of its source."""
    found: dict[str, dict[str, str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found[prefix + node.name] = _attribute_docs(node.body)
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(inspect.getsource(sys.modules[module])).body, "")
    return found


def _attribute_docs(body: list[ast.stmt]) -> dict[str, str]:
    """``name: T`` followed at once by a string statement: that string, cleaned as a
    docstring, is ``name``'s."""
    docs: dict[str, str] = {}
    for stmt, after in itertools.pairwise(body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """Model classes a field's type holds (for tables, lists and dicts of tables)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    if origin in (list, dict, typing.Annotated, typing.Union, types.UnionType):
        found: list[type[BaseModel]] = []
        for arg in args:
            found.extend(_models_in(arg))
        return found
    return []


def _walk(model: type[BaseModel], prefix: str, seen: set[type[BaseModel]]) -> Iterator[KeyDoc]:
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        yield KeyDoc(key, _field_type(info), _default(info), _doc(model, name, info))
        models = _models_in(info.annotation)
        origin = typing.get_origin(info.annotation)
        if origin is dict:
            child_prefix = f"{key}.NAME."
        elif origin is list:
            child_prefix = f"{key}[]."
        else:
            child_prefix = f"{key}."
        if models and set(models) == set(_NIC_MEMBERS):
            yield from _walk(NicBase, child_prefix, seen)
            for member in _NIC_MEMBERS:
                for doc in _walk(member, child_prefix, seen):
                    if doc.key.rsplit(".", 1)[-1] not in NicBase.model_fields:
                        tags = " | ".join(typing.get_args(member.model_fields["type"].annotation))
                        yield KeyDoc(doc.key, doc.type, doc.default, f"[{tags}] {doc.meaning}")
            continue
        for sub in models:
            if sub in seen:
                same = f"same keys as the enclosing {sub.__name__}"
                yield KeyDoc(f"{child_prefix}...", "", "", same)
                continue
            yield from _walk(sub, child_prefix, seen | {sub})


def lab_reference() -> list[KeyDoc]:
    """Every key a lab file may hold, with type, default and meaning, in model order."""
    return list(_walk(Lab, "", {Lab}))


def reference_markdown() -> str:
    """The reference as a Markdown page (docs/lab-reference.md is this, generated)."""
    lines = [
        "# Lab file reference",
        "",
        "Generated by `kvmlab check --explain -o md` (`make docs`) from the models in",
        '`kvmlab.spec`; do not edit by hand. Sizes are written `"2G"`, `"512M"` or as an',
        'integer MiB count; CPU sets as `"0-3,6"`; relative paths are relative to the lab file.',
        "A lab file is a regular file of UTF-8 TOML, at most 1 MiB.",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for doc in lab_reference():
        cells = [f"`{doc.key}`", doc.type, doc.default, doc.meaning]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["Guest", "KeyDoc", "lab_reference", "reference_markdown"]
