"""Moved to :mod:`kvmlab.migrate.workload`; these names stay importable here while the
callers outside migrate move (``migrate/stored.py``): being removed."""

from kvmlab.migrate.workload import DEFAULT_WORKLOAD as DEFAULT_WORKLOAD
from kvmlab.migrate.workload import Workload as Workload
from kvmlab.migrate.workload import running_source as running_source
