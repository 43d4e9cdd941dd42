"""The libvirt backend: guests defined, started and stopped by a real libvirtd (local or
remote by URI) through libvirt-python; the same spec, renderers and agent as the QEMU one."""
