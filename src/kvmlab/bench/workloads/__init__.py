"""The workloads of ``kvmlab bench``, a module each (see :mod:`kvmlab.bench.registry`)."""
