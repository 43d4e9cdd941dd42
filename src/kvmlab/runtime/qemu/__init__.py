"""A guest as a QEMU process kvmlab starts itself: the process, its QMP monitor, and the run
directory handed over in a migration."""
