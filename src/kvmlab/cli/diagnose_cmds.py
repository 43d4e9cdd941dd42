"""``kvmlab diagnose``: from an exit profile to a cause and a fix written into the lab
(``kvmlab exits --compare``, in :mod:`kvmlab.cli.exits_cmds`, measures before and after)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.cli.exits_cmds import DEFAULT_SECONDS
from kvmlab.cli.jsonout import emit
from kvmlab.cli.lab_cmds import find_guest, image_factory, interruptible
from kvmlab.errors import UsageError, printable
from kvmlab.exits.foreign import is_foreign

if TYPE_CHECKING:
    from rich.console import Console

    from kvmlab.exits.fixes import FixRender
    from kvmlab.exits.model import Profile
    from kvmlab.exits.own_config import OwnConfig, OwnFix
    from kvmlab.exits.rules import Diagnosis, Finding
    from kvmlab.runtime.rundir import GuestRecord
    from kvmlab.spec import Guest, LoadedLab


def lab_of(record: GuestRecord) -> tuple[LoadedLab | None, str]:
    """The lab file the guest's lab went up from (None, and why, if it is gone or changed)."""
    from kvmlab.errors import KvmlabError
    from kvmlab.runtime.rundir import LAB_FILE, LabDir
    from kvmlab.spec import load_lab

    try:
        info = json.loads((LabDir.of(record.lab).root / LAB_FILE).read_text())
        loaded = load_lab(Path(info["file"]))
    except (OSError, ValueError, KeyError, KvmlabError) as exc:
        return None, f"the lab file is not readable ({exc}): lab conditions are assumed"
    if loaded.digest != info.get("digest"):
        return loaded, f"{loaded.path} changed since the lab went up: diagnosing the file as now"
    return loaded, ""


def diagnose_cmd(
    address: str | None,
    seconds: float | None,
    provider: str,
    apply: bool,
    out: Path | None,
    output: str,
    imported: Path | None,
    connect: str | None = None,
    within: str | None = None,
) -> None:
    """``kvmlab diagnose``: the options checked together, then :func:`run_diagnose`."""
    from kvmlab.cli.exits_cmds import check_provider, refuse_with
    from kvmlab.cli.options import output_choice

    output = output_choice(output, "text", "json")
    provider = check_provider(provider)
    _check_subject(address, imported)
    if imported is not None:
        apply_refused = apply and not (address or "").startswith("domain:")
        refuse_with(
            "--import",
            {
                "--apply (it needs a running guest of a lab, or domain:NAME)": apply_refused,
                "--out": out is not None,
                "--provider": provider != "auto",
            },
        )
    if out is not None and not apply:
        raise UsageError("--out names the lab file --apply writes; give --apply too")
    _check_foreign(address, connect, apply, out, within, imported)
    if address is not None and is_foreign(address):
        subject = _foreign(address, connect, seconds, provider, imported, within)
        run_diagnose(address, None, seconds, provider, output, apply, out, subject=subject)
        return
    run_diagnose(address or "", imported, seconds, provider, output, apply, out)


def _check_subject(address: str | None, imported: Path | None) -> None:
    """An address, or an import (with a VM kvmlab did not start, for its configuration)."""
    if address is not None and imported is not None and not is_foreign(address):
        raise UsageError(
            "give the guest's address (LAB/GUEST) or --import FILE, not both: an import is "
            "diagnosed on its own (or with pid:N / domain:NAME, whose configuration it reads)"
        )
    if address is None and imported is None:
        raise UsageError("give the guest's address (LAB/GUEST) or --import FILE")


def _check_foreign(
    address: str | None,
    connect: str | None,
    apply: bool,
    out: Path | None,
    within: str | None,
    imported: Path | None,
) -> None:
    """What a VM kvmlab did not start refuses: --apply but on a libvirt domain (its
    persistent definition), -c without a domain, --within without a pid."""
    text = address or ""
    if connect is not None and not text.startswith("domain:"):
        raise UsageError("-c/--connect goes with domain:NAME (a libvirt domain's daemon)")
    if within is not None and not text.startswith("pid:"):
        raise UsageError("--within goes with pid:N (a QEMU kvmlab did not start, inside it)")
    if within is not None and imported is not None:
        raise UsageError("--within profiles the QEMU there; give it or --import FILE, not both")
    if text.startswith("pid:") and apply:
        raise UsageError(
            "--apply changes a libvirt domain's definition or writes a lab file; for a QEMU "
            "started by hand, change its command line as the finding shows and restart it"
        )
    if text.startswith("domain:") and out is not None:
        raise UsageError(
            "--out names a lab file; with domain:NAME, --apply changes the domain's own "
            "persistent definition (kvmlab import domain:NAME makes a lab of it)"
        )


@dataclass(frozen=True)
class _Subject:
    """What is diagnosed: the profile, where it came from, and the lab the guest is of."""

    profile: Profile
    address: str
    address_path: tuple[str, ...]
    why: str
    loaded: LoadedLab | None = None
    guest: Guest | None = None
    own: OwnConfig | None = None
    """A VM kvmlab did not start: its own configuration, read (None: not read)."""


def run_diagnose(
    address: str,
    imported: Path | None,
    seconds: float | None,
    provider: str,
    output: str,
    apply: bool,
    out: Path | None,
    subject: _Subject | None = None,
) -> None:
    """Profile the guest, evaluate the rules, print findings; with ``apply``, write the fix.

    Everything that can be refused is refused before the guest is profiled (the window,
    where ``--apply`` would write); when there is nothing to apply, the diagnosis is still
    printed, then the reason.
    """
    from kvmlab.exits.fixes import guest_context
    from kvmlab.exits.rules import evaluate

    if subject is None and imported is not None:
        subject = _imported(imported, seconds, apply)
    elif subject is None:
        subject = _running(address, seconds, provider, apply, out)
    context = guest_context(subject.guest) if subject.guest is not None else None
    diagnosis = evaluate(subject.profile, context)
    own = _own_fixes(subject, diagnosis)
    written, applied, refusal = None, None, ""
    if apply:
        written, applied, refusal = _apply(subject, diagnosis, own, out)
    _print_diagnosis(subject, diagnosis, output, written, applied, own)
    if applied is not None and subject.own is not None and not refusal:
        _redefine(subject.own, applied, own[applied.id])
    if refusal:
        sys.stdout.flush()
        raise UsageError(refusal)


def _apply(
    subject: _Subject, diagnosis: Diagnosis, own: dict[str, OwnFix], out: Path | None
) -> tuple[Path | None, Finding | None, str]:
    """The finding ``--apply`` takes, the lab file written with its fix (a lab's guest),
    and why nothing is applied ("" when it is)."""
    from kvmlab.exits.fix_choice import fix_to_apply

    has_lab = subject.guest is not None and (subject.loaded or subject.own) is not None
    applied, refusal = fix_to_apply(diagnosis, has_lab, subject.why)
    if applied is not None and subject.loaded is not None:
        return apply_fix(subject.loaded, subject.address_path, applied, out), applied, refusal
    if applied is not None and subject.own is not None:
        return None, applied, _own_refusal(own[applied.id])
    return None, applied, refusal


def _own_fixes(subject: _Subject, diagnosis: Diagnosis) -> dict[str, OwnFix]:
    """Each finding's fix in the VM's own configuration (a VM kvmlab did not start)."""
    from kvmlab.exits.own_config import own_fix

    if subject.own is None:
        return {}
    return {f.id: own_fix(subject.own, f.fix.lab) for f in diagnosis.findings if f.fix.lab}


def _own_refusal(fix: OwnFix) -> str:
    """Why ``--apply`` does not define ``fix`` ("" when it does)."""
    if not fix.exact:
        return (
            "nothing applied: the fix could not be carried into the domain's own XML "
            "exactly; make the change shown with virsh edit"
        )
    return ""


def _redefine(own: OwnConfig, finding: Finding, fix: OwnFix) -> None:
    """Define the domain's fixed persistent definition; say a restart is needed."""
    from kvmlab.exits.own_config import define_fixed

    define_fixed(own, fix)
    name, uri = printable(own.domain or "?"), printable(own.uri or "?")
    print(
        f"defined domain {name} on {uri} with the fix of {finding.id} (its persistent "
        f"definition only: the running VM is unchanged); restart it for the fix to take "
        f"effect: virsh -c {uri} shutdown {name}, then virsh -c {uri} start {name}",
        file=sys.stderr,
    )


def _imported(imported: Path, seconds: float | None, apply: bool) -> _Subject:
    """An imported perf report: no lab, its conditions assumed."""
    from kvmlab.cli.exits_cmds import import_seconds
    from kvmlab.exits.fixes import PLACEHOLDER
    from kvmlab.exits.perfkvm import import_file

    if apply:
        raise UsageError("--apply needs a running guest of a lab (an address), not --import")
    shown = printable(str(imported))
    profile = import_file(imported, shown, import_seconds(seconds))
    why = "no lab for an imported profile: lab conditions are assumed"
    return _Subject(profile, shown, (PLACEHOLDER,), why)


def _foreign(
    text: str,
    connect: str | None,
    seconds: float | None,
    provider: str,
    imported: Path | None,
    within: str | None,
) -> _Subject:
    """A VM kvmlab did not start: profiled from outside (or its profile from ``imported``,
    a report recorded elsewhere), its own configuration read for the rules and the fix."""
    from kvmlab.cli.exits_cmds import LIVE_SECONDS, check_seconds
    from kvmlab.exits.fixes import PLACEHOLDER
    from kvmlab.exits.foreign import profile_foreign, resolve
    from kvmlab.exits.own_config import read_config

    if within is not None:
        return _foreign_within(text, within, seconds, provider)
    target = resolve(text, connect)
    own, why = read_config(text, target.qemu.argv, connect)
    if imported is not None:
        profile = _imported(imported, seconds, False).profile
    else:
        window = check_seconds(DEFAULT_SECONDS if seconds is None else seconds, LIVE_SECONDS)
        with interruptible(f"profiling {target.label}"):
            profile = profile_foreign(target, window, provider)  # type: ignore[arg-type]
    guest = own.guest if own is not None else None
    return _Subject(profile, target.label, (PLACEHOLDER,), why, guest=guest, own=own)


def _foreign_within(text: str, within: str, seconds: float | None, provider: str) -> _Subject:
    """A QEMU kvmlab did not start inside guest hypervisor ``within``: profiled there, its
    command line read there."""
    from kvmlab.cli.exits_cmds import LIVE_SECONDS, check_seconds
    from kvmlab.exits.fixes import PLACEHOLDER
    from kvmlab.exits.foreign import argv_within, profile_within
    from kvmlab.exits.own_config import read_config
    from kvmlab.runtime import backends

    window = check_seconds(DEFAULT_SECONDS if seconds is None else seconds, LIVE_SECONDS)
    run_dir, record = find_guest(within)
    hyper = backends.attach(run_dir, record)
    label = f"{text} inside {within}"
    with interruptible(f"profiling {label}"):
        profile = profile_within(hyper, within, text, window, provider)  # type: ignore[arg-type]
    argv, unread = argv_within(hyper, within, text)
    own, why = read_config(text, argv, None, unread)
    guest = own.guest if own is not None else None
    return _Subject(profile, label, (PLACEHOLDER,), why, guest=guest, own=own)


def _running(
    address: str, seconds: float | None, provider: str, apply: bool, out: Path | None
) -> _Subject:
    """A running guest's profile, with the lab file it went up from."""
    from kvmlab.cli.exits_cmds import LIVE_SECONDS, check_seconds
    from kvmlab.exits.collect import profile_guest

    window = check_seconds(DEFAULT_SECONDS if seconds is None else seconds, LIVE_SECONDS)
    if apply:
        check_apply_out(out)
    run_dir, record = find_guest(address)
    loaded, why = lab_of(record)
    guest = loaded.lab.find("/".join(record.address)) if loaded else None
    with interruptible(f"profiling the VM exits of {address}"):
        profile = profile_guest(run_dir, record, window, provider)  # type: ignore[arg-type]
    return _Subject(profile, address, tuple(record.address), why, loaded, guest)


def _print_diagnosis(
    subject: _Subject,
    diagnosis: Diagnosis,
    output: str,
    written: Path | None,
    applied: Finding | None,
    own: dict[str, OwnFix],
) -> None:
    """The diagnosis as JSON or text; then, when a fix was written, how to check it."""
    from rich.console import Console

    if output == "json":
        findings = [f.to_json() for f in diagnosis.findings]
        for found in findings:
            if subject.own is not None:
                fix = own.get(str(found["rule"]))
                found["own_fix"] = fix.to_json() if fix is not None else None
        emit(
            "diagnosis",
            {
                "address": subject.address,
                "profile": subject.profile.to_json(),
                "findings": findings,
                "unchecked": [str(u) for u in diagnosis.unchecked],
                "lab_note": subject.why or None,
                "written": str(written) if written else None,
            },
        )
        return
    console = Console()
    show_diagnosis(subject.profile, diagnosis, console, subject.why, subject.address_path, own)
    if written is not None and applied is not None:
        console.print(
            f"\nwrote {written}: the lab with the fix of {applied.id} as a "
            "variant; measure both the same way with\n"
            f"  kvmlab exits {written} --compare --guest {'/'.join(subject.address_path)}",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )


def check_apply_out(out: Path | None) -> None:
    """Refuse, before anything is measured, a place ``--apply`` could not write: an
    existing file (never overwritten), a directory, a missing directory; without ``--out``,
    a current directory that takes no new file."""
    from kvmlab.cli.outfile import check_out

    if out is None:
        if not os.access(".", os.W_OK | os.X_OK):
            raise UsageError(
                "--apply writes the fixed lab into the current directory, which "
                "takes no new file (permission denied); give --out FILE"
            )
        return
    try:
        out.lstat()
    except FileNotFoundError:
        pass
    except OSError:  # a name the file system cannot hold: check_out says why, one line
        check_out(out)
    if out.is_dir():
        raise UsageError(
            f"--out {printable(str(out))} is a directory; give a file name, e.g. "
            f"{printable(str(out / 'fixed-lab.toml'))}"
        )
    if os.path.lexists(out):
        raise UsageError(
            f"--out {printable(str(out))} exists; kvmlab does not overwrite it: name a new file"
        )
    check_out(out)


def show_diagnosis(
    profile: Profile,
    diagnosis: Diagnosis,
    console: Console,
    why: str,
    address: tuple[str, ...],
    own: dict[str, OwnFix] | None = None,
) -> None:
    """Findings with evidence and fix; the rules that lacked data."""
    from kvmlab.exits.text import header

    def say(text: str = "") -> None:
        console.print(text, soft_wrap=True, highlight=False, markup=False)

    for line in header(profile):
        say(line)
    if why:
        say(f"note: {why}")
    if not diagnosis.findings:
        say("\nno rule fired: nothing in this profile matches a known cause")
    for n, finding in enumerate(diagnosis.findings, 1):
        say(f"\n{n}. [{finding.severity}] {finding.title} ({finding.id})")
        say(f"   cause: {finding.cause}")
        for line in finding.evidence:
            say(f"   evidence: {line}")
        for line in finding.assumed:
            say(f"   assumed: {line}")
        if own and finding.id in own:
            _show_own_fix(own[finding.id], say)
        else:
            _show_fix(finding, say, address)
        sources = finding.rule.source
        for src in [sources] if isinstance(sources, str) else sources:
            say(f"   source: {src}")
    for item in diagnosis.unchecked:
        say(str(item))


def _show_fix(finding: Finding, say: object, address: tuple[str, ...]) -> None:
    assert callable(say)
    from kvmlab.exits.fixes import PLACEHOLDER, variant_toml

    if finding.fix.lab:
        placeholder = " (GUEST: the guest's name in your lab)" if address == (PLACEHOLDER,) else ""
        say(f"   fix in the lab file{placeholder}:")
        for line in variant_toml(f"fix-{finding.id}", address, finding.fix.lab).splitlines():
            say(f"     {line}")
    for step in finding.fix.host:
        say(f"   fix on the host: {step}")
    for step in finding.fix.guest:
        say(f"   in the guest: {step}")
    for line in finding.verify:
        say(f"   verify: {line}")


def _show_own_fix(fix: OwnFix, say: object) -> None:
    """A fix in the VM's own configuration: the change, then how it takes effect."""
    assert callable(say)
    where = "its domain XML" if fix.kind == "domain" else "its QEMU command line"
    say(f"   fix in {where}:" if fix.exact else f"   fix, as kvmlab renders it ({where}):")
    for line in fix.lines:
        say(f"     {line}")
    for note in fix.notes:
        say(f"   note: {note}")
    for step in fix.steps:
        say(f"   then: {step}")


def apply_fix(
    loaded: LoadedLab, address: tuple[str, ...], finding: Finding, out: Path | None
) -> Path:
    """Write the lab with ``finding``'s fix as a variant; print its QEMU and XML changes."""
    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.cli.outfile import OutputError
    from kvmlab.exits.fixes import fix_renders, write_variant_lab
    from kvmlab.runtime.lab import make_target
    from kvmlab.runtime.rundir import LabDir

    if not finding.fix.lab:
        raise UsageError(f"{finding.id} has no lab-file fix (host or guest steps only)")
    host, _ = host_accel()
    guest = loaded.lab.find("/".join(address))
    assert guest is not None
    run_dir = LabDir.of(loaded.lab.name).root.joinpath(*address)
    target = make_target(loaded, address, guest, host, run_dir, image_factory()())
    rendered = fix_renders(loaded.lab, address, finding.fix.lab, target)
    dest = out or Path(f"{loaded.lab.name}-fix-{finding.id}.toml")
    existed = os.path.lexists(dest)  # then write_variant_lab refuses it and never opens it
    try:
        written = write_variant_lab(
            loaded.path,
            dest,
            f"fix-{finding.id}",
            address,
            finding.fix.lab,
            comment=f"kvmlab diagnose: {finding.title}",
        )
    except OSError as exc:  # the write of the file it just created failed: none half-written
        if not existed:
            with contextlib.suppress(OSError):
                dest.unlink()
        raise OutputError(f"cannot write {printable(str(dest))}: {exc.strerror or exc}") from None
    _print_renders(rendered)
    return written


def _print_renders(rendered: FixRender) -> None:
    """What the fix changes in the guest's QEMU command line and libvirt XML, on stderr."""
    for arg in rendered.args_removed:
        print(f"QEMU before: {arg}", file=sys.stderr)
    for arg in rendered.args_added:
        print(f"QEMU after:  {arg}", file=sys.stderr)
    for change in rendered.xml_changes:
        print(
            f"libvirt {change.parent}: {change.before or '(none)'} -> "
            f"{change.after or '(removed)'}",
            file=sys.stderr,
        )
