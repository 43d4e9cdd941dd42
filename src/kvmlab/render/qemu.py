"""Spec -> QEMU command line."""

from __future__ import annotations

from kvmlab.render.argv import QemuArgs, QemuCommand, opts
from kvmlab.render.devices import guest_parts
from kvmlab.render.identity import domain_uuid
from kvmlab.render.target import Target
from kvmlab.spec import Guest


def render_qemu(guest: Guest, target: Target) -> QemuCommand:
    """The argv that runs ``guest`` as ``target`` describes, with notes explaining choices."""
    accel, why = target.accel_for(guest)
    guest = guest.under(accel)  # its when_tcg overrides, under TCG
    q = QemuArgs(accel=accel, machine=guest.machine)
    q.note(why)
    for part in guest_parts(guest, target, accel):
        part.qemu(q)
    machine = opts(guest.machine, **q.machine_props)
    accel_opt = "kvm" if accel == "kvm" else "tcg,thread=multi"
    cpu = ",".join([q.cpu_model, *q.cpu_props])
    head = [
        target.qemu_binary,
        "-name",
        f"guest={target.name},debug-threads=on",
        "-uuid",  # the domain's UUID: the guest reads it as its SMBIOS system UUID
        domain_uuid(target.lab, target.address),
        "-machine",
        machine,
        "-accel",
        accel_opt,
        "-cpu",
        cpu,
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-msg",
        "timestamp=on",
    ]
    return QemuCommand(argv=head + q.args, notes=q.notes)
