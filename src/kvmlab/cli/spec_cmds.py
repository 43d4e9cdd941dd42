"""``kvmlab check`` and ``kvmlab render``."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kvmlab.cli.jsonout import emit
from kvmlab.errors import Problem, SpecError, UsageError, printable
from kvmlab.spec import Guest, LoadedLab, load_lab
from kvmlab.spec.units import format_size

if TYPE_CHECKING:
    from kvmlab.guest.image import GuestImage
    from kvmlab.render import Target
    from kvmlab.render.libvirt_caps import LibvirtCaps
    from kvmlab.spec.reference import KeyDoc


@dataclass(frozen=True)
class _Here:
    """A guest as it runs on this host."""

    path: tuple[str, ...]
    written: Guest
    accel: str

    @property
    def tcg_applied(self) -> bool:
        """Whether its ``when_tcg`` applies here."""
        return self.accel == "tcg" and bool(self.written.when_tcg)

    @property
    def guest(self) -> Guest:
        """The guest with its ``when_tcg`` applied under TCG."""
        return self.written.under(self.accel)


def _here(loaded: LoadedLab) -> list[_Here]:
    """Each guest with the accelerator ``kvmlab render`` gives it on this host: the host's
    for a top-level guest, KVM inside a guest hypervisor (which exposes it), or the lab's
    ``accel``."""
    from kvmlab.cli.hostinfo import host_accel

    top: str | None = None
    out = []
    for path, guest in loaded.lab.walk():
        if guest.accel != "auto":
            accel: str = guest.accel
        elif len(path) > 1:
            accel = "kvm"
        else:
            top = top or host_accel()[0].accel
            accel = top
        out.append(_Here(path, guest, accel))
    return out


def _when_tcg_keys(overrides: dict[str, object], prefix: str = "") -> list[str]:
    """The keys ``when_tcg`` sets (``vcpus``, ``memory.size``), tables followed."""
    keys = []
    for key, value in overrides.items():
        if isinstance(value, dict) and value:
            keys += _when_tcg_keys(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _summary(here: list[_Here]) -> list[str]:
    lines = []
    for h in here:
        guest = h.guest
        nics = ",".join(n.type for n in guest.nics) or "no NIC"
        role = " guest hypervisor" if guest.nested else ""
        if guest.kvm is not None and guest.kvm.asked():
            asked = ", ".join(f"{k}={'on' if v else 'off'}" for k, v in guest.kvm.asked().items())
            role += f" (its KVM: {asked})"
        tcg = ""
        if h.tcg_applied:
            keys = ", ".join(_when_tcg_keys(h.written.when_tcg))
            tcg = f"; under TCG here, with its when_tcg ({keys})"
        lines.append(
            f"  L{len(h.path)} {'/'.join(h.path)}:{role} {guest.vcpus} vCPU, "
            f"{format_size(guest.memory.size)} {guest.memory.backing} RAM, "
            f"{len(guest.disks)} disk(s), NICs: {nics}, cpu {guest.cpu.model}{tcg}"
        )
    return lines


def _guests_json(here: list[_Here]) -> list[dict[str, object]]:
    return [
        {
            "address": "/".join(h.path),
            "level": f"L{len(h.path)}",
            "hypervisor": g.nested,
            "vcpus": g.vcpus,
            "memory_bytes": g.memory.size,
            "memory_backing": g.memory.backing,
            "disks": len(g.disks),
            "nics": [n.type for n in g.nics],
            "cpu": g.cpu.model,
            "accel": h.accel,
            "when_tcg_applied": h.tcg_applied,
        }
        for h in here
        for g in (h.guest,)
    ]


def _host_warnings(loaded: LoadedLab) -> list[str]:
    """Host CPUs the lab (or a variant) names that this host lacks: a lab may be meant for
    another host, so ``check`` warns, and ``up``, ``run``, ``bench`` and ``tune`` refuse."""
    from kvmlab.runtime.hostcpus import host_online_cpus
    from kvmlab.spec.hostcpus import all_cpu_uses, missing_cpus

    online = host_online_cpus()
    found: dict[str, str] = {}
    for key, message in missing_cpus(all_cpu_uses(loaded.lab), online):
        found[key] = message
    for name, variant in loaded.variants().items() if loaded.lab.variants else ():
        for key, message in missing_cpus(all_cpu_uses(variant.lab), online):
            if found.get(key) != message:
                found.setdefault(f"variants.{name}.{key}", message)
    out = [
        f"{key}: {message}; up, run, bench and tune refuse the lab on this host"
        for key, message in found.items()
    ]
    return out + _accel_warnings(loaded)


def _accel_warnings(loaded: LoadedLab) -> list[str]:
    """Top-level guests that force ``accel = "kvm"`` on a host whose KVM would not serve
    them (software nested KVM, or none usable): ``auto`` would choose better here."""
    forced = [p for p, g in loaded.lab.walk() if len(p) == 1 and g.accel == "kvm"]
    if not forced:
        return []
    from kvmlab.cli.hostinfo import host_accel

    _, choice = host_accel()
    if choice.accel == "kvm":
        return []
    return [
        f'guests.{path[0]}.accel = "kvm": {choice.reason}; accel = "auto" runs it '
        "under TCG here, and uses KVM on a host with hardware KVM"
        for path in forced
    ]


def run_check(labs: list[Path], output: str = "text", variant: str | None = None) -> None:
    """Validate every file; print a summary per valid lab (or JSON), raise with all
    problems. ``variant``: summarise that configuration of each lab."""
    problems: list[Problem] = []
    report: list[dict[str, object]] = []
    for path in labs:
        entry, found = _check_one(path, output, variant)
        report.append(entry)
        problems.extend(found)
    if output == "json":
        emit("check", {"ok": not problems, "labs": report})
    if problems:
        raise SpecError(problems)


def _check_one(
    path: Path, output: str, variant: str | None
) -> tuple[dict[str, object], list[Problem]]:
    """One lab file's entry of the report and its problems (text: its summary printed)."""
    try:
        loaded = load_lab(path)
        if variant is not None:
            loaded = loaded.variant_named(variant)
    except SpecError as exc:
        problems = [asdict(p) for p in exc.problems]
        entry = {"file": str(path), "ok": False, "lab": None, "guests": [], "problems": problems}
        return entry, list(exc.problems)
    warnings = _host_warnings(loaded)
    here = _here(loaded)
    if output == "text":
        which = f", variant {variant}" if variant else ""
        print(f"{path}: ok (lab {loaded.lab.name}{which})")
        print("\n".join(_summary(here)))
        for warning in warnings:
            print(printable(f"  warning: {warning}"))
    entry = {
        "file": str(path),
        "ok": True,
        "lab": loaded.lab.name,
        "guests": _guests_json(here),
        "problems": [],
        "host_warnings": warnings,
    }
    return entry, []


def run_explain(output: str, wanted: list[str]) -> None:
    """Print the lab-file reference generated from the models (text, md or json); with
    ``wanted``, only the keys whose path holds one of those words (``nics``,
    ``guests.NAME.memory``)."""
    from kvmlab.spec.reference import lab_reference, reference_markdown

    if output == "md" and not wanted:
        print(reference_markdown(), end="")
        return
    docs = [d for d in lab_reference() if not wanted or any(_names(d.key, w) for w in wanted)]
    if not docs:
        shown = ", ".join(printable(w) for w in wanted)
        raise UsageError(
            f"no lab-file key matches {shown}; 'kvmlab check --explain' lists every key"
        )
    if output == "json":
        emit("keys", {"keys": [asdict(d) for d in docs]})
        return
    for doc in docs:
        print(_key_text(doc, output))


def _names(key: str, word: str) -> bool:
    """Whether ``word`` names ``key`` or a part of its path (``nics`` names
    ``guests.NAME.nics`` and ``guests.NAME.nics[].queues``)."""
    parts = key.replace("[]", "").split(".")
    wanted = word.replace("[]", "").split(".")
    return any(parts[i : i + len(wanted)] == wanted for i in range(len(parts)))


def _key_text(doc: KeyDoc, output: str) -> str:
    """One key: on a terminal a block that fits it (the key, its type and default, the
    meaning wrapped below); in a pipe one whole line each, for grep (Markdown: a list
    item)."""
    import shutil
    import textwrap

    default = f", default {doc.default}" if doc.default else ""
    head = printable(f"{doc.key}  ({doc.type}{default})")
    if output == "md":
        return f"- `{doc.key}` ({doc.type}{default}): {doc.meaning}"
    if not sys.stdout.isatty():
        return f"{head}  {printable(doc.meaning)}"
    width = max(40, min(shutil.get_terminal_size((100, 24)).columns, 100))
    body = textwrap.fill(doc.meaning, width, initial_indent="    ", subsequent_indent="    ")
    return f"{head}\n{printable(body)}"


def _targets(loaded: LoadedLab, address: str | None) -> list[tuple[tuple[str, ...], Guest]]:
    guests = list(loaded.lab.walk())
    if address is None:
        return guests
    chosen = [(p, g) for p, g in guests if "/".join(p) == address.strip("/")]
    if not chosen:
        known = ", ".join("/".join(p) for p, _ in guests)
        raise UsageError(f"lab {loaded.lab.name} has no guest {address!r} (it has: {known})")
    return chosen


def run_render(
    lab_path: Path,
    address: str | None,
    fmt: str,
    connect: str | None = None,
    publish: bool = False,
    variant: str | None = None,
) -> None:
    """Print each selected guest's QEMU command line or libvirt XML; for libvirt, say on
    stderr what the printed domain needs that this host lacks (``publish``: upload the
    image and seeds to the daemon at ``connect`` first)."""
    from kvmlab.cli.hostinfo import host_accel
    from kvmlab.render import render_qemu
    from kvmlab.runtime.render_target import render_target

    if connect is not None:  # before anything is printed: a bad URI is all that is said
        from kvmlab.spec.backend import uri_option

        uri_option(connect, "--connect")
    loaded = load_lab(lab_path)
    if variant is not None:
        loaded = loaded.variant_named(variant)
    top, _ = host_accel()
    chosen = _targets(loaded, address)
    caps = _daemon_caps(fmt, connect)
    image = _image(chosen, fmt)
    rendered: list[dict[str, object]] = []
    for n, (path, guest) in enumerate(chosen):
        target = render_target(loaded, path, guest, top, image)
        if fmt == "libvirt":
            target, caps = _for_libvirt(loaded, path, guest, target, caps, connect, publish)
        if fmt == "json":
            argv = render_qemu(guest, target).argv
            rendered.append({"guest": "/".join(path), "level": f"L{len(path)}", "argv": argv})
            continue
        _print_rendered(path, guest, target, fmt, n if len(chosen) > 1 else None)
    if fmt == "json":
        emit("render", {"lab": loaded.lab.name, "variant": variant, "guests": rendered})


def _daemon_caps(fmt: str, connect: str | None) -> LibvirtCaps | None:
    """The capabilities of the libvirt at ``connect``, read before anything is printed (a
    daemon that does not answer: nothing printed)."""
    if fmt != "libvirt" or connect is None:
        return None
    from kvmlab.cli import render_daemon

    return render_daemon.capabilities_at(connect)


def _image(chosen: list[tuple[tuple[str, ...], Guest]], fmt: str) -> GuestImage | None:
    """The newest cached default image; where it will be (said so) if none is built yet and
    a chosen guest boots it."""
    from kvmlab.guest.image import latest_cached_image, placeholder_image
    from kvmlab.render.xmldom import xml_comment

    image = latest_cached_image()
    if image is None and any(g.boot == "image" for _, g in chosen):
        image = placeholder_image()
        text = "the default image is not built yet; 'kvmlab image' builds it"
        if fmt == "json":
            print(f"kvmlab: note: {text}", file=sys.stderr)
        else:
            print(f"# {text}" if fmt == "qemu" else xml_comment(text))
    return image


def _for_libvirt(
    loaded: LoadedLab,
    path: tuple[str, ...],
    guest: Guest,
    target: Target,
    caps: LibvirtCaps | None,
    connect: str | None,
    publish: bool,
) -> tuple[Target, LibvirtCaps]:
    """The target for the libvirt at ``connect`` (published there with ``publish``), its
    needs said on stderr; and that libvirt's capabilities, read once."""
    from kvmlab.cli import render_daemon

    caps = caps or render_daemon.capabilities_at(connect)
    target = replace(target, libvirt=caps)
    if publish and connect is not None and len(path) == 1:
        target = render_daemon.published(target, guest, connect, path[-1])
    render_daemon.say_needs(loaded, guest, target, caps, connect)
    return target, caps


def _print_rendered(
    path: tuple[str, ...], guest: Guest, target: Target, fmt: str, n: int | None
) -> None:
    """One guest's command line or XML (``n``: its place among several, under a heading)."""
    from kvmlab.render import render_libvirt, render_qemu
    from kvmlab.render.xmldom import xml_comment

    if n is not None:
        sep = "\n" if n else ""
        text = f"guest {'/'.join(path)} (L{len(path)})"
        print(sep + (f"# {text}" if fmt == "qemu" else xml_comment(text)))
    if fmt == "qemu":
        print(render_qemu(guest, target).shell(), end="")
    else:
        print(render_libvirt(guest, target), end="")
