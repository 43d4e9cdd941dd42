"""2 MiB huge pages for a switch: reserved for the run when too few are free, given back
after (to exactly the count there was), never touched when enough were free already."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import HostError
from kvmlab.spec.units import MIB

SYSFS = Path("/sys/kernel/mm/hugepages/hugepages-2048kB")
PAGE = 2 * MIB


@dataclass(frozen=True)
class Reservation:
    """What kvmlab changed: ``nr_hugepages`` from ``before`` to ``after`` (equal: nothing)."""

    before: int
    after: int

    @property
    def changed(self) -> bool:
        """Whether kvmlab raised the count (and must lower it again)."""
        return self.after != self.before


def _read(name: str, root: Path) -> int:
    return int((root / name).read_text().split()[0])


def reserve(size: int, what: str, root: Path = SYSFS) -> Reservation:
    """Make ``size`` bytes of free 2 MiB pages available for ``what``; :class:`HostError`
    with the exact command when the kernel cannot give them."""
    need = -(-size // PAGE)
    try:
        total, free = _read("nr_hugepages", root), _read("free_hugepages", root)
    except (OSError, ValueError):
        raise HostError(f"{what} needs {need} huge pages of 2 MiB, and this kernel offers none "
                        f"({root} is missing)") from None  # fmt: skip
    if free >= need:
        return Reservation(total, total)
    wanted = total + need - free
    try:
        (root / "nr_hugepages").write_text(f"{wanted}\n")
        got = _read("nr_hugepages", root)
    except OSError as exc:
        raise HostError(f"{what} needs {need} free huge pages of 2 MiB ({free} free) and "
                        f"kvmlab cannot reserve them: {exc.strerror}",
                        fix=[f"echo {wanted} > {root}/nr_hugepages"]) from None  # fmt: skip
    if got < wanted:
        _write_back(root, total)
        raise HostError(f"{what} needs {need} free huge pages of 2 MiB; the kernel found only "
                        f"{got - total + free} (memory too fragmented or too small)",
                        fix=[f"echo {wanted} > {root}/nr_hugepages   # early, or at boot: "
                             f"hugepages={wanted}"])  # fmt: skip
    return Reservation(total, got)


def release(res: Reservation, root: Path = SYSFS) -> None:
    """Give back what :func:`reserve` added (pages still in use are freed by the kernel as
    soon as their user exits)."""
    if res.changed:
        _write_back(root, res.before)


def _write_back(root: Path, count: int) -> None:
    with contextlib.suppress(OSError):
        (root / "nr_hugepages").write_text(f"{count}\n")
