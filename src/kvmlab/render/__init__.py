"""Rendering a guest of a lab: to a QEMU command line and to libvirt domain XML.

Pure: the functions here take a spec and a :class:`Target` and return text; they
never start a process or read the host.
"""

from kvmlab.render.argv import QemuCommand
from kvmlab.render.libvirt import render_libvirt
from kvmlab.render.qemu import render_qemu
from kvmlab.render.target import Accel, BootImage, Target

__all__ = ["Accel", "BootImage", "QemuCommand", "Target", "render_libvirt", "render_qemu"]
