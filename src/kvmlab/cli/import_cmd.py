"""``kvmlab import``: a VM users already have as a lab file (the libvirt side reads a
defined domain's XML)."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

from kvmlab.errors import UsageError, printable
from kvmlab.spec.importing import (
    MAX_INPUT,
    Imported,
    from_domain_xml,
    from_qemu_argv,
    lab_file_text,
)

SYSTEM_URI = "qemu:///system"


def read_source(path: str) -> str:
    """A file's text (``-``: standard input), bounded, refusing what is not a file."""
    shown = printable(path)
    if path == "-":
        fd, close = 0, False
    else:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise UsageError(f"{shown}: cannot be read ({exc.strerror})") from None
        close = True
    try:
        if close and not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{shown} is not a file; give a domain's XML or a command line")
        chunks, size = [], 0
        while size <= MAX_INPUT:
            chunk = os.read(fd, MAX_INPUT + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        if close:
            os.close(fd)
    if size > MAX_INPUT:
        raise UsageError(f"{shown}: over {MAX_INPUT // 1048576} MiB: not a VM's definition")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{shown}: not UTF-8 text (byte {exc.start})") from None


def imported(source: str, connect: str | None, boot_image: bool) -> Imported:
    """``source`` as a lab: ``domain:NAME`` (on ``connect``, else the system libvirtd),
    ``pid:N`` (a running QEMU's command line), or a file holding a domain's XML or a QEMU
    command line (``-``: standard input)."""
    if not source.strip() or source == "domain:":
        raise UsageError(
            f"{source!r} names no VM: give a domain's XML file, domain:NAME, pid:N or - "
            "(kvmlab import --help)"
        )
    if source.startswith("domain:"):
        from kvmlab.runtime.libvirt.domain_xml import domain_xml

        uri = connect or SYSTEM_URI
        name = source[len("domain:") :]
        return from_domain_xml(domain_xml(uri, name), f"domain {name} on {uri}", boot_image)
    if connect is not None:
        raise UsageError("-c/--connect goes with domain:NAME (a domain defined there)")
    if source.startswith("pid:"):
        return _from_pid(source, boot_image)
    text = read_source(source)
    shown = "standard input" if source == "-" else source
    if text.lstrip().startswith("<"):
        return from_domain_xml(text, shown, boot_image)
    return from_qemu_argv(text, shown, boot_image)


def _from_pid(source: str, boot_image: bool) -> Imported:
    from kvmlab.runtime.host_vms import qemu_process

    raw = source[len("pid:") :]
    found = qemu_process(int(raw)) if raw.isdigit() and 0 < int(raw) < 1 << 22 else None
    if found is None:
        raise UsageError(
            f"{printable(source)}: no QEMU runs as that pid here; kvmlab ps --all lists every QEMU"
        )
    return from_qemu_argv(shlex.join(found.argv), f"pid {found.pid}", boot_image)


def run_import(source: str, connect: str | None, boot_image: bool, out: Path | None) -> None:
    """Print (or write to ``out``) the lab file made from ``source``; what it leaves out
    or changes on stderr as well as in the file's comments."""
    from kvmlab.cli.outfile import check_out, write_out

    if out is not None:
        check_out(out)
        if out.exists():
            raise UsageError(
                f"--out {printable(str(out))} exists; kvmlab import overwrites nothing: "
                "give a new file name"
            )
    lab = imported(source, connect, boot_image)
    words = ["kvmlab", "import", source]
    if connect:
        words += ["-c", connect]
    if boot_image:
        words.append("--boot-image")
    text = lab_file_text(lab, shlex.join(words))
    for line in lab.changed:
        print(f"kvmlab: import: changed: {printable(line)}", file=sys.stderr)
    for line in lab.left_out:
        print(f"kvmlab: import: not carried over: {printable(line)}", file=sys.stderr)
    if out is None:
        sys.stdout.write(text)
        return
    write_out(out, text)
    name = lab.doc["name"]
    print(
        f"wrote {printable(str(out))}: lab {name}; kvmlab check {printable(str(out))}, "
        f"then kvmlab up {printable(str(out))}",
        file=sys.stderr,
    )
