"""``kvmlab diagnose`` and ``kvmlab exits --compare``: from an exit profile to a cause, a fix
written into the lab, and the before/after measurement that shows whether it worked."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.cli.exits_cmds import DEFAULT_SECONDS
from kvmlab.cli.jsonout import emit
from kvmlab.cli.lab_cmds import find_guest, image_factory, interruptible
from kvmlab.errors import UsageError, printable

if TYPE_CHECKING:
    from rich.console import Console

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


def run_diagnose(
    address: str,
    imported: Path | None,
    seconds: float | None,
    provider: str,
    output: str,
    apply: bool,
    out: Path | None,
) -> None:
    """Profile the guest, evaluate the rules, print findings; with ``apply``, write the fix.

    Everything that can be refused is refused before the guest is profiled (the window,
    where ``--apply`` would write); when there is nothing to apply, the diagnosis is still
    printed, then the reason.
    """
    from rich.console import Console

    from kvmlab.cli.exits_cmds import LIVE_SECONDS, check_seconds, import_seconds
    from kvmlab.exits.collect import profile_guest
    from kvmlab.exits.fixes import guest_context
    from kvmlab.exits.rules import evaluate

    if imported is not None:
        from kvmlab.exits.fixes import PLACEHOLDER
        from kvmlab.exits.perfkvm import import_file

        if apply:
            raise UsageError("--apply needs a running guest of a lab (an address), not --import")
        shown = printable(str(imported))
        profile = import_file(imported, shown, import_seconds(seconds))
        loaded, guest, context = None, None, None
        address = shown
        address_path: tuple[str, ...] = (PLACEHOLDER,)
        why = "no lab for an imported profile: lab conditions are assumed"
    else:
        window = check_seconds(DEFAULT_SECONDS if seconds is None else seconds, LIVE_SECONDS)
        if apply:
            check_apply_out(out)
        run_dir, record = find_guest(address)
        loaded, why = lab_of(record)
        guest = loaded.lab.find("/".join(record.address)) if loaded else None
        context = guest_context(guest) if guest is not None else None
        address_path = tuple(record.address)
        with interruptible(f"profiling the VM exits of {address}"):
            profile = profile_guest(run_dir, record, window, provider)  # type: ignore[arg-type]
    diagnosis = evaluate(profile, context)
    written, applied, refusal = None, None, None
    if apply:
        applied = next((f for f in diagnosis.findings if f.fix.lab), None)
        if loaded is None or guest is None:
            refusal = f"nothing to apply: {why}"
        elif applied is None:
            refusal = (
                "nothing to apply: no finding has a lab-file fix"
                if diagnosis.findings
                else "nothing to apply: no rule fired"
            )
        else:
            written = apply_fix(loaded, address_path, applied, out)
    if output == "json":
        emit(
            "diagnosis",
            {
                "address": address,
                "profile": profile.to_json(),
                "findings": [f.to_json() for f in diagnosis.findings],
                "unchecked": [str(u) for u in diagnosis.unchecked],
                "lab_note": why or None,
                "written": str(written) if written else None,
            },
        )
    else:
        console = Console()
        show_diagnosis(profile, diagnosis, console, why, address_path)
        if written is not None and applied is not None:
            console.print(
                f"\nwrote {written}: the lab with the fix of {applied.id} as a "
                "variant; measure both the same way with\n"
                f"  kvmlab exits {written} --compare --guest {'/'.join(address_path)}",
                soft_wrap=True,
                highlight=False,
                markup=False,
            )
    if refusal is not None:
        sys.stdout.flush()
        raise UsageError(refusal)


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
    return written


def run_compare(
    lab_path: Path,
    guest: str,
    seconds: float,
    settle: float,
    output: str,
    provider: str = "auto",
    chosen: Sequence[str] = (),
) -> None:
    """Boot each variant of the lab (``chosen``: those) in turn, profile ``guest`` the
    same way, compare.

    Everything is checked before the first variant boots: the windows, the guest's path,
    that every variant has the guest.
    """
    import time

    from rich.console import Console

    from kvmlab.cli.exits_cmds import LIVE_SECONDS, check_seconds
    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.errors import RuntimeFailure
    from kvmlab.exits.collect import profile_guest
    from kvmlab.exits.compare import show_compare
    from kvmlab.progress import Relay
    from kvmlab.runtime import lab as labrun
    from kvmlab.runtime.rundir import LabDir
    from kvmlab.spec import load_lab

    check_seconds(seconds, LIVE_SECONDS)
    check_seconds(settle, (0.0, 3600.0), "--settle")
    loaded = load_lab(lab_path)
    from kvmlab.cli.backend_opts import lab_backend

    with lab_backend(loaded) as backend:
        if not backend.capabilities.exits_compare:
            raise backend.refusal(loaded, "exits LAB --compare")
    if loaded.lab.find(guest) is None:
        known = ", ".join("/".join(path) for path, _ in loaded.lab.walk())
        raise UsageError(
            f"lab {loaded.lab.name} has no guest {printable(repr(guest))} "
            f"(its guests: {known}; --guest is a path like l1/l2)"
        )
    variants = loaded.variants(chosen)
    if len(variants) < 2:
        raise UsageError(
            f"{printable(str(lab_path))}: nothing to compare "
            + (
                "(name two or more with --variant)"
                if chosen
                else "(kvmlab diagnose --apply writes a variant)"
            )
        )
    from kvmlab.runtime.guest_kvm import check_host_kvm

    guests: dict[str, Guest] = {}
    for name, variant in variants.items():
        check_host_kvm(variant)  # every variant this host's KVM cannot run, before any boots
        found = variant.lab.find(guest)
        if found is None:
            raise UsageError(f"variant {name} of lab {loaded.lab.name} has no guest {guest}")
        guests[name] = found
    host, _ = host_accel()
    err = Console(stderr=True, soft_wrap=True)
    profiles: dict[str, Profile] = {}
    for name, variant in variants.items():
        shown = Relay(lambda text: err.print(f"  {text}", highlight=False, markup=False))
        progress = shown.prefixed(f"{name}: ")

        # Up and down as the commands do (guests detached, reached through their records),
        # so the profile is taken exactly as `kvmlab exits` takes it.
        with interruptible(f"comparing variant {name} of {loaded.lab.name}"):
            labrun.up(variant, labrun.Launch(host, image_factory(), progress=progress))
            try:
                progress.step(f"up; settling for {settle:g} s, then {seconds:g} s")
                time.sleep(settle)
                lab_dir = LabDir.of(loaded.lab.name)
                entry = next(
                    (
                        e
                        for e in lab_dir.entries()
                        if "/".join(e.address) == guest and e.record is not None
                    ),
                    None,
                )
                if entry is None or entry.record is None:
                    raise RuntimeFailure(
                        f"variant {name}: guest {guest} is not running after "
                        f"'kvmlab up' of lab {loaded.lab.name}"
                    )
                profiles[name] = profile_guest(entry.run_dir, entry.record, seconds, provider)  # type: ignore[arg-type]
            finally:
                labrun.down(loaded.lab.name, progress=progress)
    show_compare(profiles, guests, Console(), output)
