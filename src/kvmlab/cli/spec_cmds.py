"""``kvmlab check`` and ``kvmlab render``."""

from __future__ import annotations

from pathlib import Path

from kvmlab.errors import Problem, SpecError, UsageError
from kvmlab.spec import Guest, LoadedLab, load_lab
from kvmlab.spec.units import format_size


def _summary(loaded: LoadedLab) -> list[str]:
    lines = []
    for path, guest in loaded.lab.walk():
        level = f"L{len(path)}"
        nics = ",".join(n.type for n in guest.nics) or "no NIC"
        role = " guest hypervisor" if guest.nested else ""
        lines.append(
            f"  {level} {'/'.join(path)}:{role} {guest.vcpus} vCPU, "
            f"{format_size(guest.memory.size)} {guest.memory.backing} RAM, "
            f"{len(guest.disks)} disk(s), NICs: {nics}, cpu {guest.cpu.model}"
        )
    return lines


def run_check(labs: list[Path]) -> None:
    """Validate every file; print a summary per valid lab, raise with all problems."""
    problems: list[Problem] = []
    for path in labs:
        try:
            loaded = load_lab(path)
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        print(f"{path}: ok (lab {loaded.lab.name})")
        print("\n".join(_summary(loaded)))
    if problems:
        raise SpecError(problems)


def run_explain(markdown: bool) -> None:
    """Print the lab-file reference generated from the models."""
    from kvmlab.spec.reference import lab_reference, reference_markdown

    if markdown:
        print(reference_markdown(), end="")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Lab file keys", show_lines=False, expand=True)
    for column in ("key", "type", "default", "meaning"):
        table.add_column(column, overflow="fold")
    for doc in lab_reference():
        table.add_row(doc.key, doc.type, doc.default, doc.meaning)
    Console().print(table)


def _targets(loaded: LoadedLab, address: str | None) -> list[tuple[tuple[str, ...], Guest]]:
    guests = list(loaded.lab.walk())
    if address is None:
        return guests
    chosen = [(p, g) for p, g in guests if "/".join(p) == address.strip("/")]
    if not chosen:
        known = ", ".join("/".join(p) for p, _ in guests)
        raise UsageError(f"lab {loaded.lab.name} has no guest {address!r} (it has: {known})")
    return chosen


def run_render(lab_path: Path, address: str | None, fmt: str) -> None:
    """Print each selected guest's QEMU command line or libvirt XML."""
    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.guest.image import latest_cached_image, placeholder_image
    from kvmlab.render import render_libvirt, render_qemu
    from kvmlab.runtime.lab import HostAccel, make_target
    from kvmlab.runtime.rundir import LabDir

    loaded = load_lab(lab_path)
    top, _ = host_accel()
    chosen = _targets(loaded, address)
    image = latest_cached_image()
    if image is None and any(g.boot == "image" for _, g in chosen):
        image = placeholder_image()
        print(f"{'#' if fmt == 'qemu' else '<!--'} the default image is not built yet; "
              f"'kvmlab image' builds it{'' if fmt == 'qemu' else ' -->'}")  # fmt: skip
    for n, (path, guest) in enumerate(chosen):
        if len(path) == 1:
            host = top
        else:
            why = f"runs inside guest hypervisor {path[-2]}, which exposes KVM"
            host = HostAccel("kvm", why, "svm" if top.accel == "tcg" else top.virt_flag)
        run_dir = LabDir.of(loaded.lab.name).guest_dir(path)
        target = make_target(loaded, path, guest, host, run_dir, image)
        if len(chosen) > 1:
            sep = "\n" if n else ""
            mark = "#" if fmt == "qemu" else "<!--"
            end = "" if fmt == "qemu" else " -->"
            print(f"{sep}{mark} guest {'/'.join(path)} (L{len(path)}){end}")
        if fmt == "qemu":
            print(render_qemu(guest, target).shell(), end="")
        else:
            print(render_libvirt(guest, target), end="")
