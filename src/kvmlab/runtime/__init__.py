"""Running guests: QEMU processes, QMP, the guest agent, run directories, clean-up."""
