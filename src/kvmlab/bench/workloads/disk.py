"""The ``disk`` workload: fio 4k random read, then write, direct I/O, libaio, the
nested-KVM write-up's depth, numjobs = vCPUs.

One fio run holds both jobs (``--stonewall``: write starts when read ended, each its own
group): starting fio costs 18 s in a TCG-in-TCG L2 (measured), more than a job runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvmlab.bench.parsers.fio import parse_fio
from kvmlab.bench.registry import LevelWorkload, Settings, Step, register

if TYPE_CHECKING:
    from kvmlab.bench.executor import Place

KEEP = tuple(
    f"{rw}_{metric}"
    for rw in ("randread", "randwrite")
    for metric in ("iops", "bandwidth_mib_s", "clat_p99_us")
)


def steps(place: Place, s: Settings) -> list[Step]:
    if place.disk is None:
        return []
    target = place.disk if place.disk.startswith("/dev/") else f"{place.disk}/fio.dat"
    argv = [
        "fio",
        "--bs=4k",
        "--direct=1",
        "--ioengine=libaio",
        f"--iodepth={s.fio_iodepth}",
        f"--numjobs={place.vcpus}",
        f"--size={s.fio_size}",
        f"--runtime={s.duration:g}",
        "--time_based",
        "--group_reporting",
        "--output-format=json",
        f"--filename={target}",
        "--name=randread",
        "--rw=randread",
        "--name=randwrite",
        "--rw=randwrite",
        "--stonewall",
    ]
    # Step "rand": metric names starting with it are stored as they are (randread_iops).
    return [Step("rand", argv, parse_fio, 2 * s.duration + 120, keep=KEEP, scratch=True)]


register(
    LevelWorkload(
        "disk", order=30, steps=steps, metrics=KEEP, suites=("quick", "full"), needs=("disk",)
    )
)
