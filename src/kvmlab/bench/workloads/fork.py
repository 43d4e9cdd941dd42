"""The ``fork`` workload: stress-ng's fork stressor on every vCPU, processes created, run
and reaped per second.

Each fork builds an address space and each exit tears it down: page-table work, which
shadow paging (a guest hypervisor without nested paging, as in the nested-paging talk)
traps and nested paging does not. The YAML report goes to stdout (the table goes to
stderr).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.bench import tools
from kvmlab.bench.parsers.stress_ng import parse_stress_ng
from kvmlab.bench.registry import LevelWorkload, Settings, Step, register

if TYPE_CHECKING:
    from kvmlab.bench.executor import Place


def steps(place: Place, s: Settings) -> list[Step]:
    argv = [
        *tools.fork_stressor(place.vcpus, s.duration),
        "--metrics-brief",
        "--yaml",
        "/proc/self/fd/1",  # stdout: guests have no /dev/stdout (udev makes that link)
    ]
    return [Step("fork", argv, parse_stress_ng, s.duration + 120, keep=("fork_bogo_ops_per_s",))]


register(
    LevelWorkload("fork", order=70, steps=steps, metrics=("fork_bogo_ops_per_s",), suites=("full",))
)
