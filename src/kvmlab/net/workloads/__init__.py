"""The packet-path and network workloads, a module each (see :mod:`kvmlab.bench.registry`)."""
