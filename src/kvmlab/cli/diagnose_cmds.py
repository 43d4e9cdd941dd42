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
) -> None:
    """``kvmlab diagnose``: the options checked together, then :func:`run_diagnose`."""
    from kvmlab.cli.exits_cmds import check_provider, refuse_with
    from kvmlab.cli.options import output_choice

    output = output_choice(output, "text", "json")
    provider = check_provider(provider)
    if address is not None and imported is not None:
        raise UsageError(
            "give the guest's address (LAB/GUEST) or --import FILE, not both: an import is "
            "diagnosed on its own"
        )
    if address is None and imported is None:
        raise UsageError("give the guest's address (LAB/GUEST) or --import FILE")
    if imported is not None:
        refuse_with(
            "--import",
            {
                "--apply (it needs a running guest of a lab)": apply,
                "--out": out is not None,
                "--provider": provider != "auto",
            },
        )
    if out is not None and not apply:
        raise UsageError("--out names the lab file --apply writes; give --apply too")
    _check_foreign(address, connect, apply)
    run_diagnose(address or "", imported, seconds, provider, output, apply, out, connect)


def _check_foreign(address: str | None, connect: str | None, apply: bool) -> None:
    """What a VM kvmlab did not start refuses: --apply (no lab file), -c without a domain."""
    if connect is not None and not (address or "").startswith("domain:"):
        raise UsageError("-c/--connect goes with domain:NAME (a libvirt domain's daemon)")
    if address is not None and is_foreign(address) and apply:
        raise UsageError(
            "--apply writes a lab file; for a VM kvmlab did not start, make the change the "
            "finding shows (a libvirt domain: virsh edit NAME, then restart it)"
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


def run_diagnose(
    address: str,
    imported: Path | None,
    seconds: float | None,
    provider: str,
    output: str,
    apply: bool,
    out: Path | None,
    connect: str | None = None,
) -> None:
    """Profile the guest, evaluate the rules, print findings; with ``apply``, write the fix.

    Everything that can be refused is refused before the guest is profiled (the window,
    where ``--apply`` would write); when there is nothing to apply, the diagnosis is still
    printed, then the reason.
    """
    from kvmlab.exits.fixes import guest_context
    from kvmlab.exits.rules import evaluate

    if imported is not None:
        subject = _imported(imported, seconds, apply)
    elif is_foreign(address):
        subject = _foreign(address, connect, seconds, provider)
    else:
        subject = _running(address, seconds, provider, apply, out)
    context = guest_context(subject.guest) if subject.guest is not None else None
    diagnosis = evaluate(subject.profile, context)
    written, applied, refusal = None, None, ""
    if apply:
        from kvmlab.exits.fix_choice import fix_to_apply

        has_lab = subject.loaded is not None and subject.guest is not None
        applied, refusal = fix_to_apply(diagnosis, has_lab, subject.why)
        if applied is not None and subject.loaded is not None:
            written = apply_fix(subject.loaded, subject.address_path, applied, out)
    _print_diagnosis(subject, diagnosis, output, written, applied)
    if refusal:
        sys.stdout.flush()
        raise UsageError(refusal)


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


def _foreign(text: str, connect: str | None, seconds: float | None, provider: str) -> _Subject:
    """A VM kvmlab did not start, profiled from outside: no lab, its conditions assumed."""
    from kvmlab.cli.exits_cmds import LIVE_SECONDS, check_seconds
    from kvmlab.exits.fixes import PLACEHOLDER
    from kvmlab.exits.foreign import profile_foreign, resolve

    window = check_seconds(DEFAULT_SECONDS if seconds is None else seconds, LIVE_SECONDS)
    target = resolve(text, connect)
    with interruptible(f"profiling {target.label}"):
        profile = profile_foreign(target, window, provider)  # type: ignore[arg-type]
    why = (
        "a VM kvmlab did not start: no lab, its conditions assumed; each fix is shown as "
        "the lab-file change and its QEMU and libvirt forms, for that VM's own configuration"
    )
    return _Subject(profile, target.label, (PLACEHOLDER,), why)


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
) -> None:
    """The diagnosis as JSON or text; then, when a fix was written, how to check it."""
    from rich.console import Console

    if output == "json":
        emit(
            "diagnosis",
            {
                "address": subject.address,
                "profile": subject.profile.to_json(),
                "findings": [f.to_json() for f in diagnosis.findings],
                "unchecked": [str(u) for u in diagnosis.unchecked],
                "lab_note": subject.why or None,
                "written": str(written) if written else None,
            },
        )
        return
    console = Console()
    show_diagnosis(subject.profile, diagnosis, console, subject.why, subject.address_path)
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
    profile: Profile, diagnosis: Diagnosis, console: Console, why: str, address: tuple[str, ...]
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
