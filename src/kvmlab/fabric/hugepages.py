"""2 MiB huge pages for a switch: reserved for the run when too few are free, given back
after (the pool shrinks by exactly what kvmlab added), never touched when enough were free."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kvmlab.errors import HostError
from kvmlab.proc.confined import checked_run_root
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


@contextmanager
def _locked() -> Iterator[None]:
    """One kvmlab at a time changes the pool (a lock file in kvmlab's run root)."""
    path = checked_run_root() / ".hugepages.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def reserve(size: int, what: str, root: Path = SYSFS) -> Reservation:
    """Make ``size`` bytes of 2 MiB pages available for ``what`` (free and not promised to
    another process); :class:`HostError` with the exact command when the kernel cannot."""
    need = -(-size // PAGE)
    with _locked():
        try:
            total = _read("nr_hugepages", root)
            free = _read("free_hugepages", root) - _read("resv_hugepages", root)
        except (OSError, ValueError):
            raise HostError(
                f"{what} needs {need} huge pages of 2 MiB, and this kernel offers "
                f"none ({root} is missing)"
            ) from None
        if free >= need:
            return Reservation(total, total)
        wanted = total + need - free
        try:
            (root / "nr_hugepages").write_text(f"{wanted}\n")
            got = _read("nr_hugepages", root)
        except OSError as exc:
            raise HostError(
                f"{what} needs {need} free huge pages of 2 MiB ({free} free) and "
                f"kvmlab cannot reserve them: {exc.strerror}",
                fix=[f"echo {wanted} > {root}/nr_hugepages"],
            ) from None
        if got < wanted:
            _write_back(root, total)
            raise HostError(
                f"{what} needs {need} free huge pages of 2 MiB; the kernel found "
                f"only {got - total + free} (memory too fragmented or too small)",
                fix=[
                    f"echo {wanted} > {root}/nr_hugepages   # early, or at boot: hugepages={wanted}"
                ],
            )
        return Reservation(total, got)


def release(res: Reservation, root: Path = SYSFS, guarded: bool = False) -> bool:
    """Give back what :func:`reserve` added: the pool shrinks by that many pages from
    whatever it is now (another lab's or the admin's own changes since are kept). With
    ``guarded`` (a reservation read back from a record another kvmlab left), only while the
    pool still holds at least what that kvmlab made it: one made smaller since is not
    kvmlab's to shrink. False when nothing was given back."""
    if not res.changed:
        return False
    with _locked(), contextlib.suppress(OSError, ValueError):
        now = _read("nr_hugepages", root)
        if guarded and now < res.after:
            return False
        _write_back(root, max(now - (res.after - res.before), 0))
        return True
    return False


def _write_back(root: Path, count: int) -> None:
    with contextlib.suppress(OSError):
        (root / "nr_hugepages").write_text(f"{count}\n")
