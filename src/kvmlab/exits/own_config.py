"""A finding's fix in the configuration of a VM kvmlab did not start: for a libvirt domain,
a diff of its own persistent definition and the ``virsh`` steps; for a QEMU started by
hand, the options of its own command line to change.

The configuration is read as ``kvmlab import`` reads it (to a lab guest, which the rules
check their conditions against), the fix is applied and rendered before and after, and
the difference is carried into the VM's own text. That text is then imported again to
prove it holds the fix; where it does not (a spelling the carrying cannot edit), the fix is
shown as kvmlab renders it, and said to be so.
"""

from __future__ import annotations

import copy
import difflib
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kvmlab.errors import KvmlabError, UsageError, printable
from kvmlab.exits.fixes import XmlChange, fix_renders, guest_context, lookup
from kvmlab.render.target import Target
from kvmlab.spec import Guest, Lab
from kvmlab.spec.importing import Imported, from_domain_xml, from_qemu_argv

ConfigKind = Literal["domain", "qemu"]

_PREFIXES = re.compile(r'xmlns:([A-Za-z_][\w.-]*)="([^"]+)"')
NO_DISK = "/dev/null"
"""The disk a VM that boots no disk of its own is rendered with (never in a fix's change)."""

SUBOPTION_FLAGS = {"-no-hpet": ("-machine", "hpet")}
"""Legacy options that say what a sub-option of another says: dropped when the fix sets it."""


@dataclass(frozen=True)
class OwnConfig:
    """A VM's own configuration: its domain's XML or its QEMU command line, and the lab
    guest it imports to."""

    kind: ConfigKind
    text: str
    """The domain's persistent XML, or the command line as shell words."""
    imported: Imported
    uri: str | None = None
    domain: str | None = None

    @property
    def under_tcg(self) -> bool:
        """Whether the configuration asks for TCG (a fix is still rendered for KVM)."""
        return bool(self.imported.guest.get("accel") == "tcg")

    @property
    def lab(self) -> Lab:
        """The imported lab as it runs under KVM (VM exits exist only there)."""
        doc = _doc(self.imported)
        for guest in doc["guests"].values():
            guest.pop("accel", None)
            if guest.get("boot") == "image":  # no disk, no kernel: the import would boot
                guest["boot"] = "disk"  # kvmlab's image; the VM boots what it boots
                guest["disks"] = [{"path": NO_DISK, "format": "raw"}]
        return Lab.model_validate(doc)

    @property
    def address(self) -> tuple[str, ...]:
        """The one guest's path in :attr:`lab`."""
        return (next(iter(self.imported.doc["guests"])),)

    @property
    def guest(self) -> Guest:
        """The VM as a lab guest."""
        found = self.lab.find(self.address[0])
        assert found is not None
        return found

    @property
    def described(self) -> str:
        """``domain win10's definition`` or ``its command line``, for notes."""
        if self.kind == "domain":
            return f"domain {self.domain}'s definition on {self.uri}"
        return "its QEMU command line"


def _doc(imported: Imported) -> dict[str, Any]:
    """The imported lab document, its NICs' networks left out but the lab's own (the others
    name the VM's, which a lab cannot hold)."""
    doc = copy.deepcopy(imported.doc)
    for guest in doc["guests"].values():
        for nic in guest.get("nics", []):
            if nic.get("network") not in imported.networks:
                nic.pop("network", None)
    if imported.networks:
        doc["networks"] = copy.deepcopy(imported.networks)
    return doc


def domain_config(text: str, uri: str, name: str) -> OwnConfig:
    """Domain ``name``'s persistent XML ``text`` (read from ``uri``) as its configuration."""
    return OwnConfig("domain", text, from_domain_xml(text, f"domain {name} on {uri}"), uri, name)


def qemu_config(argv: Sequence[str], source: str) -> OwnConfig:
    """A running QEMU's ``argv`` as its configuration."""
    text = shlex.join(argv)
    return OwnConfig("qemu", text, from_qemu_argv(text, source))


@dataclass(frozen=True)
class OwnFix:
    """A fix in the VM's own configuration."""

    kind: ConfigKind
    lines: list[str]
    """The change: a unified diff of the domain XML, or ``-opt old -> -opt new`` lines."""
    steps: list[str]
    """How to make it take effect."""
    exact: bool
    """Whether ``lines`` edit the VM's own text (read back to hold the fix); False: the fix
    as kvmlab renders it, to be made by hand."""
    new_text: str | None = None
    """The changed domain XML (what ``--apply`` defines) or command line; None when not exact."""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The fix for ``-o json``."""
        return {
            "kind": self.kind,
            "change": self.lines,
            "steps": self.steps,
            "exact": self.exact,
            "notes": self.notes,
        }


def _target(config: OwnConfig) -> Target:
    """Rendering for the VM as it runs: under KVM (its exits were profiled), nothing of a
    kvmlab run (no run directory is made: rendering is pure)."""
    lab = config.lab
    return Target(
        lab=lab.name,
        address=config.address,
        lab_dir=Path(),
        run_dir=Path("/nonexistent/kvmlab-own-config"),
        auto_accel="kvm",
        auto_reason="the VM runs under KVM (its exits were profiled)",
    )


def own_fix(config: OwnConfig, change: Mapping[str, object]) -> OwnFix:
    """``change`` (a finding's lab-file fix) in ``config``'s own terms."""
    try:
        rendered = fix_renders(config.lab, config.address, change, _target(config))
    except KvmlabError as exc:
        return OwnFix(config.kind, [], [], False, notes=[f"not rendered: {exc}"])
    fixed = rendered.lab.find(config.address[0])
    assert fixed is not None
    want = {key: lookup(guest_context(fixed), key) for key in change}
    if config.kind == "domain":
        return _domain_fix(config, rendered.xml_changes, rendered.xml_error, want)
    return _qemu_fix(config, rendered.args_removed, rendered.args_added, want)


def _holds(imported: Imported, want: Mapping[str, object]) -> bool:
    """Whether the VM's changed text, imported again, has every value the fix sets."""
    doc = _doc(imported)
    try:
        guest = Lab.model_validate(doc).find(next(iter(doc["guests"])))
    except ValueError:
        return False
    if guest is None:
        return False
    context = guest_context(guest)
    return all(lookup(context, key) == value for key, value in want.items())


# A domain's XML -------------------------------------------------------------------------------


def _domain_fix(
    config: OwnConfig, changes: list[XmlChange], error: str | None, want: Mapping[str, object]
) -> OwnFix:
    name, uri = printable(config.domain or "?"), printable(config.uri or "?")
    restart = (
        f"restart it for the change to take effect: virsh -c {uri} shutdown {name}, then "
        f"virsh -c {uri} start {name} (the running VM keeps its old configuration)"
    )
    if error is not None:
        return OwnFix("domain", [], [], False, notes=[f"no domain XML for the fix: {error}"])
    for prefix, uri_ in _PREFIXES.findall(config.text):  # written back with its own
        ET.register_namespace(prefix, uri_)  # prefixes (qemu:, libosinfo:), not ns0:
    before = ET.fromstring(config.text)
    after = copy.deepcopy(before)
    try:
        for change in changes:
            _carry(after, change)
    except ValueError as exc:
        return _domain_by_hand(changes, restart, str(exc))
    ET.indent(before, space="  ")
    ET.indent(after, space="  ")
    old, new = ET.tostring(before, encoding="unicode"), ET.tostring(after, encoding="unicode")
    source = f"domain {config.domain} (as changed)"
    try:
        holds = _holds(from_domain_xml(new, source), want)
    except UsageError:
        holds = False
    if not holds:
        return _domain_by_hand(changes, restart, "its XML, read back, does not hold the fix")
    diff = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"{name} (now)", f"{name} (fixed)", lineterm="", n=2
    )
    steps = [
        f"virsh -c {uri} edit {name} and make the change above, or kvmlab diagnose "
        f"domain:{name} -c {uri} --apply (it changes only the persistent definition)",
        restart,
    ]
    return OwnFix("domain", list(diff), steps, True, new + "\n")


def _domain_by_hand(changes: list[XmlChange], restart: str, why: str) -> OwnFix:
    lines = []
    for change in changes:
        lines.append(f"in {change.parent}: {change.before or '(none)'}")
        lines.append(f"  becomes {change.after or '(removed)'}")
    return OwnFix(
        "domain",
        lines,
        ["virsh edit NAME and make the change above", restart],
        False,
        notes=[f"shown as kvmlab renders it: {why}"],
    )


def _key(el: ET.Element) -> tuple[str, str | None]:
    return str(el.tag), el.get("name")


def _children(el: ET.Element) -> list[str]:
    return sorted(ET.tostring(c, encoding="unicode").strip() for c in el)


def _carry(root: ET.Element, change: XmlChange) -> None:
    """Make ``change`` (found between kvmlab's renderings) in the domain's own tree."""
    parts = [p for p in change.parent.split("/") if p]
    if not parts or parts[0] != root.tag:
        raise ValueError(f"the change is at {change.parent}, outside <{root.tag}>")
    parent = root
    for tag in parts[1:]:
        below = parent.find(tag)
        if below is None:
            below = ET.SubElement(parent, tag)
        parent = below
    old = ET.fromstring(change.before) if change.before else None
    new = ET.fromstring(change.after) if change.after else None
    probe = old if old is not None else new
    assert probe is not None
    match = next((c for c in parent if _key(c) == _key(probe)), None)
    if match is None:
        if new is not None:
            parent.append(new)
        return
    if old is not None and new is not None and _children(old) == _children(new):
        match.attrib.clear()  # the element itself changed, not what it holds: keep the
        match.attrib.update(new.attrib)  # domain's own children as they are
        if not len(match):
            match.text = new.text
        return
    index = list(parent).index(match)
    parent.remove(match)
    if new is not None:
        parent.insert(index, new)


# A QEMU command line -------------------------------------------------------------------------


def _pairs(options: Sequence[str]) -> list[tuple[str, str | None]]:
    """``-opt value`` strings (as :mod:`kvmlab.exits.fixes` gives them) as pairs."""
    out: list[tuple[str, str | None]] = []
    for text in options:
        words = shlex.split(text)
        out.append((words[0], words[1] if len(words) > 1 else None))
    return out


def _items(value: str) -> list[tuple[str, str]]:
    """A QEMU option value's comma items as (key, item): the first bare word is the
    positional ``""`` key (a CPU model, a machine type); ``+f``/``-f``/``f=x`` key ``f``."""
    out: list[tuple[str, str]] = []
    for n, item in enumerate(value.split(",")):
        if "=" in item:
            out.append((item.partition("=")[0], item))
        elif item[:1] in "+-" and len(item) > 1:
            out.append((item[1:], item))
        else:
            out.append(("" if n == 0 else item, item))
    return out


def _edited(own: str, old: str, new: str) -> str:
    """The user's option value ``own`` with what changed from ``old`` to ``new`` (kvmlab's
    renderings) carried over: items gone dropped, items new or changed set."""
    before, after = dict(_items(old)), dict(_items(new))
    items = _items(own)
    for key in before:
        if key not in after:
            items = [(k, i) for k, i in items if k != key]
    for key, item in after.items():
        if before.get(key) == item:
            continue
        at = next((n for n, (k, _) in enumerate(items) if k == key), None)
        if at is None:
            items.append((key, item))
        else:
            items[at] = (key, item)
    return ",".join(i for _, i in items)


def _qemu_fix(
    config: OwnConfig, removed: list[str], added: list[str], want: Mapping[str, object]
) -> OwnFix:
    restart = (
        "restart that QEMU with the changed command line: kvmlab never stops or restarts "
        "a VM it did not start"
    )
    argv = shlex.split(config.text)
    new_argv = list(argv)
    lines: list[str] = []
    gone, made = _pairs(removed), _pairs(added)
    try:
        for option, value in made:
            old = next((v for o, v in gone if o == option), None)
            gone = [(o, v) for o, v in gone if o != option] if old is not None else gone
            at = [n for n, word in enumerate(new_argv[:-1]) if word == option]
            if len(at) > 1:
                raise ValueError(f"{option} is given {len(at)} times")
            if at and value is not None and old is not None:
                mine = new_argv[at[0] + 1]
                new_argv[at[0] + 1] = _edited(mine, old, value)
                now = shlex.join(new_argv[at[0] : at[0] + 2])
                lines.append(f"{shlex.join([option, mine])}  ->  {now}")
            elif not at:
                new_argv += [option] if value is None else [option, value]
                lines.append(f"add {shlex.join([option] if value is None else [option, value])}")
            else:
                raise ValueError(f"{option} changes in a way kvmlab does not carry over")
            for flag, (owner, key) in SUBOPTION_FLAGS.items():
                if owner == option and flag in new_argv and key in dict(_items(value or "")):
                    new_argv.remove(flag)
                    lines.append(f"drop {flag} (it sets {owner} {key})")
        for option, value in gone:
            words = [option] if value is None else [option, value]
            at = [n for n in range(len(new_argv)) if new_argv[n : n + len(words)] == words]
            if len(at) != 1:
                raise ValueError(f"{shlex.join(words)} is not in its command line as such")
            del new_argv[at[0] : at[0] + len(words)]
            lines.append(f"drop {shlex.join(words)}")
        holds = _holds(from_qemu_argv(shlex.join(new_argv), "its changed command line"), want)
    except (ValueError, UsageError) as exc:
        return _qemu_by_hand(removed, added, restart, str(exc))
    if not holds:
        return _qemu_by_hand(removed, added, restart, "its command line, read back, lacks it")
    return OwnFix("qemu", lines, [restart], True, shlex.join(new_argv))


def _qemu_by_hand(removed: list[str], added: list[str], restart: str, why: str) -> OwnFix:
    lines = [f"kvmlab's before: {arg}" for arg in removed]
    lines += [f"kvmlab's after:  {arg}" for arg in added]
    return OwnFix(
        "qemu",
        lines,
        ["make the same change to the options of its command line that set these", restart],
        False,
        notes=[f"shown as kvmlab renders it: {why}"],
    )


# Reading it ----------------------------------------------------------------------------------


def read_config(
    text: str, argv: Sequence[str], uri: str | None, unread: str = ""
) -> tuple[OwnConfig | None, str]:
    """The configuration of the VM ``text`` names (``domain:NAME``: its persistent XML on
    ``uri``; ``pid:N``: ``argv``, its command line, or ``unread``: why it could not be
    read), and a note; None and why when it does not import (the rules then assume their
    conditions)."""
    from kvmlab.runtime.host_vms import SYSTEM_URI
    from kvmlab.runtime.libvirt.domain_xml import domain_xml

    assumed = "the rules' conditions are assumed"
    if unread and not text.startswith("domain:"):
        return None, f"its configuration was not read ({unread}): {assumed}"
    try:
        if text.startswith("domain:"):
            where, name = uri or SYSTEM_URI, text[len("domain:") :]
            config = domain_config(domain_xml(where, name), where, name)
        else:
            config = qemu_config(argv, f"{text}'s command line")
        config.lab  # noqa: B018  (validated here: a refusal is a note, not a failure)
    except (KvmlabError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"its configuration was not read ({why}): {assumed}"
    tcg = " (it asks for TCG: each fix is for it under KVM, where VM exits are)"
    return config, (
        f"a VM kvmlab did not start: the rules read {config.described} (as kvmlab import "
        f"reads it){tcg if config.under_tcg else ''}; each fix is shown in it"
    )


def define_fixed(own: OwnConfig, fix: OwnFix) -> None:
    """Define domain ``own``'s fixed persistent definition (``fix`` made from its XML)."""
    from kvmlab.runtime.libvirt.domain_xml import redefine

    if own.kind != "domain" or own.uri is None or own.domain is None or fix.new_text is None:
        raise UsageError("only a libvirt domain's definition is changed, and only exactly")
    redefine(own.uri, own.domain, own.text, fix.new_text)
