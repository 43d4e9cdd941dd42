"""kvmlab: declarative, measured QEMU/KVM labs (guests, nested guests, benchmarks)."""

__version__ = "0.1.0"
