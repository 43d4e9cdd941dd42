"""Rendering a guest of a lab: to a QEMU command line and to libvirt domain XML.

Pure: the functions here take a spec and a :class:`Target` and return text; they
never start a process or read the host.

The names below load their module on first use: a command that needs only a module of
this package (the names of a guest's run files, :mod:`kvmlab.render.runfiles`) does not
import both renderers and every lab model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.lazy import lazy_names

if TYPE_CHECKING:  # (explicit re-exports, for the type checker)
    from kvmlab.render.argv import QemuCommand as QemuCommand
    from kvmlab.render.libvirt import render_libvirt as render_libvirt
    from kvmlab.render.qemu import render_qemu as render_qemu
    from kvmlab.render.target import Accel as Accel
    from kvmlab.render.target import BootImage as BootImage
    from kvmlab.render.target import Target as Target

_WHERE = {
    "QemuCommand": "argv",
    "render_libvirt": "libvirt",
    "render_qemu": "qemu",
    **dict.fromkeys(("Accel", "BootImage", "Target"), "target"),
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_names(__name__, _WHERE, globals())
