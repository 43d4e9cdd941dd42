"""A VM users already have, as a lab file: a libvirt domain's XML
(:mod:`.domain_xml`) or a QEMU command line (:mod:`.qemu_argv`) becomes one guest of a
lab. What the guest sees is carried over (CPU model and flags, topology, memory and its
backing, NUMA, pinning, clock and timers, Hyper-V enlightenments, disks, NICs and their
queues); what a lab file cannot say is listed, never dropped silently
(:attr:`~.common.Imported.left_out`, :attr:`~.common.Imported.changed`).

Input is read like any other: bounded, no DOCTYPE (no entities), names checked; the lab
file written (:func:`~.common.lab_file_text`) is validated like any lab file.
"""

from kvmlab.spec.importing.common import MAX_INPUT, Imported, lab_file_text
from kvmlab.spec.importing.domain_xml import from_domain_xml
from kvmlab.spec.importing.qemu_argv import from_qemu_argv

__all__ = ["MAX_INPUT", "Imported", "from_domain_xml", "from_qemu_argv", "lab_file_text"]
