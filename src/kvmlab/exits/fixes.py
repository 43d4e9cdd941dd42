"""A rule's lab change, made concrete: planned against the guest, applied to the lab and
checked by the spec models, rendered as QEMU arguments and libvirt XML before and after,
and written as a ``[variants.NAME...]`` table that ``kvmlab run`` compares with the lab.

Changes are dotted keys under one guest (``clock.timers.hpet.present``). Rendering is pure;
only :func:`write_variant_lab` writes, and never over an existing file.
"""

from __future__ import annotations

import copy
import math
import os
import re
import shlex
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kvmlab.errors import Problem, RenderError, SpecError, UsageError
from kvmlab.render.libvirt import render_libvirt
from kvmlab.render.qemu import render_qemu
from kvmlab.render.target import Target
from kvmlab.spec.lab import Guest, Lab
from kvmlab.spec.load import format_loc, parse_lab, read_lab_bytes
from kvmlab.spec.rules import check_lab, guest_key
from kvmlab.spec.units import NAME_PATTERN

# Dotted keys ---------------------------------------------------------------------------------


def lookup(context: Mapping[str, object], key: str) -> object:
    """The value of a dotted key in a context of flat dotted keys or nested tables; None when
    unset. In a flat context a table's key gives the table of its dotted keys."""
    if key in context:
        return context[key]
    current: object = context
    for part in key.split("."):
        if not (isinstance(current, Mapping) and part in current):
            prefix = key + "."
            below = {k[len(prefix) :]: v for k, v in context.items() if k.startswith(prefix)}
            return below or None
        current = current[part]
    return current


def nest(change: Mapping[str, object]) -> dict[str, Any]:
    """``{"clock.timers.hpet.present": True}`` -> ``{"clock": {"timers": {"hpet": {...}}}}``."""
    out: dict[str, Any] = {}
    for key, value in change.items():
        _set(out, key, value)
    return out


def _set(table: dict[str, Any], key: str, value: object) -> None:
    *parents, leaf = key.split(".")
    for part in parents:
        below = table.setdefault(part, {})
        if not isinstance(below, dict):
            raise ValueError(f"{key}: {part} is a value, not a table")
        table = below
    table[leaf] = value


def guest_context(guest: Guest) -> dict[str, object]:
    """The context rules read for ``guest``: its settings as nested tables (unset tables
    such as ``hyperv`` are None), without its own guests."""
    return guest.model_dump(exclude={"guests", "when_tcg"}, by_alias=True)


# Planning ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixPlan:
    """A rule's fix for one guest: the lab change (dotted keys, final values), host steps and
    steps inside the guest. An empty ``lab`` means the lab already has what the fix sets."""

    lab: dict[str, object]
    host: tuple[str, ...]
    guest: tuple[str, ...]


def plan_fix(
    set_: Mapping[str, object],
    add: Mapping[str, object],
    host: Sequence[str],
    guest: Sequence[str],
    context: Mapping[str, object] | None,
) -> FixPlan:
    """The change that sets ``set_`` and extends with ``add``, against ``context`` (the
    guest's settings; None: as if the added keys were empty). Keys already at their value
    are left out. Words for ``append`` on a guest that boots its own disk become a guest
    step: the lab's ``append`` does not reach that kernel."""
    change: dict[str, object] = dict(set_)
    steps = list(guest)
    for key, value in add.items():
        current = lookup(context, key) if context is not None else None
        if key == "append" and context is not None and lookup(context, "boot") == "disk":
            steps.append(
                f"add {value} to the guest kernel's command line (GRUB_CMDLINE_LINUX "
                "in /etc/default/grub, then update-grub or grub2-mkconfig): a guest "
                "booting its own disk does not get the lab's append"
            )
            continue
        change[key] = _extended(current, value)
    if context is not None:
        change = {k: v for k, v in change.items() if lookup(context, k) != v}
    return FixPlan(change, tuple(host), tuple(steps))


def _extended(current: object, value: object) -> object:
    """``current`` with ``value`` added: list items once (a ``+flag``/``-flag`` replaces the
    same flag), command-line words (``key=value`` replaces ``key=...``)."""
    if isinstance(value, list):
        out = list(current) if isinstance(current, list | tuple) else []
        for item in value:
            flag = isinstance(item, str) and item[:1] in "+-" and len(item) > 1
            out = [x for x in out if not (flag and isinstance(x, str) and x[1:] == item[1:])]
            if item not in out:
                out.append(item)
        return out
    if isinstance(value, str):
        words = current.split() if isinstance(current, str) else []
        for word in value.split():
            name = word.partition("=")[0]
            words = [w for w in words if w.partition("=")[0] != name]
            words.append(word)
        return " ".join(words)
    return value


# Applying and rendering ----------------------------------------------------------------------


@dataclass(frozen=True)
class XmlChange:
    """An element of the domain XML that the fix adds, removes or changes; ``parent`` is its
    parent's path (``/domain/clock``), ``before``/``after`` the element as XML (None when
    absent)."""

    parent: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class FixRender:
    """A lab change rendered for one guest, before and after."""

    lab: Lab
    """The lab with the change applied (validated)."""
    change: dict[str, object]
    qemu_before: list[str]
    qemu_after: list[str]
    args_added: list[str]
    """QEMU options the change adds, each ``-option value`` as a shell word string."""
    args_removed: list[str]
    notes_added: list[str]
    xml_before: str | None
    xml_after: str | None
    """None when libvirt cannot run this guest (``xml_error`` says why)."""
    xml_changes: list[XmlChange] = field(default_factory=list)
    xml_error: str | None = None


def apply_change(lab: Lab, address: tuple[str, ...], change: Mapping[str, object]) -> Lab:
    """``lab`` with ``change`` applied to the guest at ``address``; a SpecError naming the
    key when the result is not a valid lab."""
    if lab.find("/".join(address)) is None:
        raise UsageError(f"lab {lab.name} has no guest {'/'.join(address)}")
    raw = lab.model_dump(exclude={"variants"}, exclude_unset=True, by_alias=True)
    table = raw
    for name in address:
        table = table["guests"][name]
    prefix = guest_key(address)
    shown = f"{lab.name} with the fix"
    for key, value in change.items():
        try:
            _set(table, key, copy.deepcopy(value))
        except ValueError as exc:
            raise SpecError([Problem(shown, f"{prefix}.{key}", str(exc))]) from None
    try:
        changed = Lab.model_validate(raw)
    except ValidationError as exc:
        problems = [
            Problem(shown, format_loc(e["loc"]), _change_message(e["msg"], change))
            for e in exc.errors()
        ]
        raise SpecError(problems) from None
    found = check_lab(changed)
    if found:
        raise SpecError([Problem(shown, key, _change_message(msg, change)) for key, msg in found])
    return changed


def _change_message(message: str, change: Mapping[str, object]) -> str:
    keys = ", ".join(change)
    return f"{message.removeprefix('Value error, ')} (after the fix changed {keys})"


def fix_renders(
    lab: Lab, address: tuple[str, ...], change: Mapping[str, object], target: Target
) -> FixRender:
    """Apply ``change`` to the guest at ``address`` and render it for ``target`` before and
    after: QEMU arguments added and removed, libvirt elements changed."""
    changed = apply_change(lab, address, change)
    where = "/".join(address)
    before, after = lab.find(where), changed.find(where)
    assert before is not None and after is not None  # apply_change checked the address
    q_before, q_after = render_qemu(before, target), render_qemu(after, target)
    added, removed = _arg_diff(q_before.argv, q_after.argv)
    notes = [n for n in q_after.notes if n not in q_before.notes]
    try:
        x_before, x_after = render_libvirt(before, target), render_libvirt(after, target)
    except RenderError as exc:
        return FixRender(
            changed,
            dict(change),
            q_before.argv,
            q_after.argv,
            added,
            removed,
            notes,
            None,
            None,
            xml_error=str(exc),
        )
    changes = xml_diff(ET.fromstring(x_before), ET.fromstring(x_after))
    return FixRender(
        changed,
        dict(change),
        q_before.argv,
        q_after.argv,
        added,
        removed,
        notes,
        x_before,
        x_after,
        changes,
    )


def _options(argv: Sequence[str]) -> list[str]:
    """``-opt value`` pairs (and lone ``-flag``s) of an argv, as shell-quoted strings."""
    out: list[str] = []
    i = 1
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out.append(shlex.join(argv[i : i + 2]))
            i += 2
        else:
            out.append(shlex.quote(argv[i]))
            i += 1
    return out


def _arg_diff(before: Sequence[str], after: Sequence[str]) -> tuple[list[str], list[str]]:
    old, new = _options(before), _options(after)
    return _minus(new, old), _minus(old, new)


def _minus(items: list[str], other: list[str]) -> list[str]:
    """``items`` less one occurrence of each of ``other`` (a multiset difference, in order)."""
    left = Counter(other)
    out = []
    for item in items:
        if left[item]:
            left[item] -= 1
        else:
            out.append(item)
    return out


def _same_node(a: ET.Element, b: ET.Element) -> bool:
    return (
        a.tag == b.tag and a.attrib == b.attrib and (a.text or "").strip() == (b.text or "").strip()
    )


def _keyed(parent: ET.Element) -> dict[tuple[str, str, int], ET.Element]:
    """Children keyed by tag, ``name`` attribute and their rank among such siblings."""
    out: dict[tuple[str, str, int], ET.Element] = {}
    for child in parent:
        base = (str(child.tag), child.get("name", ""))
        rank = sum(1 for k in out if k[:2] == base)
        out[(*base, rank)] = child
    return out


def _xml(el: ET.Element | None) -> str | None:
    if el is None:
        return None
    el = copy.deepcopy(el)
    el.tail = None
    ET.indent(el, space="  ")
    return ET.tostring(el, encoding="unicode")


def xml_diff(before: ET.Element, after: ET.Element, parent: str = "") -> list[XmlChange]:
    """The smallest elements that differ between two trees, found by walking both."""
    path = f"{parent}/{before.tag}"
    if not _same_node(before, after):
        return [XmlChange(parent or "/", _xml(before), _xml(after))]
    old, new = _keyed(before), _keyed(after)
    changes: list[XmlChange] = []
    for key in [*old, *(k for k in new if k not in old)]:
        a, b = old.get(key), new.get(key)
        if a is not None and b is not None:
            changes.extend(xml_diff(a, b, path))
        else:
            changes.append(XmlChange(path, _xml(a), _xml(b)))
    return changes


# Variants ------------------------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
_NAME = re.compile(NAME_PATTERN)


def _key(part: str) -> str:
    return part if _BARE.match(part) else _string(part)


def _string(text: str) -> str:
    escapes = {
        '"': '\\"',
        "\\": "\\\\",
        "\b": "\\b",
        "\t": "\\t",
        "\n": "\\n",
        "\f": "\\f",
        "\r": "\\r",
    }
    out = []
    for c in text:
        if c in escapes:
            out.append(escapes[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_value(value: object) -> str:
    """``value`` as a TOML value: bool, int, float, str, list, table (inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"{type(value).__name__} has no TOML form")


PLACEHOLDER = "GUEST"
"""The guest's place in a fix printed for an imported profile (no lab names the guest)."""


def variant_toml(name: str, address: tuple[str, ...], change: Mapping[str, object]) -> str:
    """``change`` as tables of the variant ``name`` for the guest at ``address``:
    ``[variants.NAME.guests.l1.clock.timers.hpet]`` then ``present = true``. An address of
    just :data:`PLACEHOLDER` stands for the guest's name, for the user to fill in."""
    for part in (name, *(() if address == (PLACEHOLDER,) else address)):
        if not _NAME.match(part):
            raise UsageError(f"{part!r} is not a name: lower-case letters, digits and dashes")
    if not change:
        raise UsageError("the fix changes nothing in the lab; there is no variant to write")
    tables: dict[tuple[str, ...], list[str]] = {}
    for key, value in change.items():
        if value is None:
            raise SpecError([Problem("variant", key, "a variant can set a key, not unset it")])
        *parents, leaf = key.split(".")
        head = ("variants", name, *(p for g in address for p in ("guests", g)), *parents)
        try:
            tables.setdefault(head, []).append(f"{_key(leaf)} = {toml_value(value)}")
        except TypeError as exc:
            raise SpecError([Problem("variant", key, str(exc))]) from None
    blocks = [
        f"[{'.'.join(_key(p) for p in head)}]\n" + "\n".join(lines) + "\n"
        for head, lines in sorted(tables.items(), key=lambda kv: len(kv[0]))
    ]
    return "\n".join(blocks)


def write_variant_lab(
    source: Path,
    dest: Path,
    name: str,
    address: tuple[str, ...],
    change: Mapping[str, object],
    comment: str = "",
) -> Path:
    """Write ``dest``: the lab file ``source`` as it is, then the fix as variant ``name``
    (``kvmlab run`` and ``exits --compare`` measure the lab as written beside it: before
    and after). The result is validated first; an existing ``dest`` is
    never overwritten. Relative paths in the lab resolve against ``dest``'s folder."""
    data = read_lab_bytes(source)
    lab = parse_lab(data, str(source))  # also refuses text that is not UTF-8
    text = data.decode("utf-8")
    if name in lab.variants:
        raise UsageError(f"{source} already has a variant {name!r}; choose another name")
    parts = [text if text.endswith("\n") else text + "\n", "\n"]
    parts += [f"# {line}\n" for line in comment.splitlines()]
    if name == "default":  # the lab as written is compared under that name already
        raise UsageError("'default' names the lab as written; choose another name")
    parts.append(variant_toml(name, address, change))
    out = "".join(parts)
    parse_lab(out.encode(), str(dest))
    try:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise UsageError(f"{dest} exists; kvmlab does not overwrite it: name a new file") from None
    except OSError as exc:
        raise UsageError(f"cannot create {dest}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(out)
    return dest
